#!/usr/bin/env python3
"""Sums a Nsight Compute CSV (ncu --metrics gpu__time_duration.sum --csv --log-file F) by kernel:
the kernels taking the most GPU time, then by kind (cuBLAS, disc's fused kernels k<fingerprint>,
disc's op kernels by name). tools/gpu_check.sh --profile writes the CSV and this summary.

usage: ncu_summary.py ncu.csv [--top N]
"""
import collections
import csv
import re
import sys

UNITS = {'nsecond': 1e-6, 'usecond': 1e-3, 'msecond': 1.0, 'second': 1e3}


def kernel_times(path):
    total, count = collections.defaultdict(float), collections.Counter()
    header = None
    for row in csv.reader(open(path)):
        if 'Kernel Name' in row and 'Metric Value' in row:
            header = row
            continue
        if not header or len(row) != len(header):
            continue
        d = dict(zip(header, row))
        if d['Metric Name'] != 'gpu__time_duration.sum':
            continue
        ms = float(d['Metric Value'].replace(',', '')) * UNITS.get(d['Metric Unit'], 1e-6)
        total[d['Kernel Name'][:70]] += ms
        count[d['Kernel Name'][:70]] += 1
    return total, count


def kind(name):
    if re.match(r'^k\d', name):
        return 'disc fused kernels (k<fingerprint>)'
    if re.search(r'gemm|cutlass|sm90|xmma|cublas|splitK', name, re.I):
        return 'cuBLAS'
    return re.sub(r'\(.*', '', name)


def main():
    top = int(sys.argv[sys.argv.index('--top') + 1]) if '--top' in sys.argv else 25
    total, count = kernel_times(sys.argv[1])
    all_ms = sum(total.values()) or 1.0
    print(f"{all_ms:.1f} ms of GPU time over {sum(count.values())} kernels")
    for name, ms in sorted(total.items(), key=lambda x: -x[1])[:top]:
        print(f"{ms:9.2f} ms {100 * ms / all_ms:5.1f}% {count[name]:6d}x  {name}")
    kinds = collections.defaultdict(float)
    for name, ms in total.items():
        kinds[kind(name)] += ms
    print("by kind:")
    for name, ms in sorted(kinds.items(), key=lambda x: -x[1]):
        print(f"{ms:9.2f} ms {100 * ms / all_ms:5.1f}%  {name}")


if __name__ == '__main__':
    main()
