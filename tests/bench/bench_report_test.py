#!/usr/bin/env python3
"""bench_all's report on recorded benchmark JSON (fixtures/, from a quick run): the table's rows
and ratios, BladeDISC++'s table at one cap per batch size with "exceeds the cap" where a system
cannot run, results.json, and the SVG plot."""
import copy
import io
import json
import os
import shutil
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "bench"))
import bench_report  # noqa: E402

FIXTURES = os.path.join(HERE, "fixtures")


class Report(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        for name in os.listdir(FIXTURES):
            shutil.copy(os.path.join(FIXTURES, name), self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def fixture(self, name):
        with open(os.path.join(FIXTURES, name + ".json")) as f:
            return json.load(f)

    def render(self):
        out = io.StringIO()
        with redirect_stdout(out):
            bench_report.render(self.dir, {"mode": "quick", "machine": {"cpu": "test cpu", "cores": 2}})
        with open(os.path.join(self.dir, "table.txt")) as f:
            self.assertEqual(f.read(), out.getvalue())
        with open(os.path.join(self.dir, "results.json")) as f:
            return out.getvalue(), json.load(f)

    def test_step_rows_carry_every_system_and_the_ratio_to_eager(self):
        text, results = self.render()
        step = self.fixture("step")
        rows = [r for r in results["rows"] if r["workload"].startswith("llama 2x256, vocab 1000, B=8")]
        self.assertEqual([r["system"] for r in rows],
                         ["disc fused (JIT, attention, head ops)", "disc unfused (reference kernels)", "PyTorch 1.13.0a0 eager",
                          "PyTorch eager, padded to buckets <= 512", "PyTorch eager, checkpointed per layer",
                          "PyTorch eager, checkpointed, padded to buckets <= 512"])
        fused = rows[0]
        want = step["disc_fused"]["tokens_per_s"] / step["torch"]["unpadded"]["tokens_per_s"]
        self.assertAlmostEqual(fused["vs_pytorch_eager"], want)
        self.assertEqual(fused["peak_rss_bytes"], step["disc_fused"]["peak_rss_bytes"])
        self.assertIn(f"{want:.2f}x", text)
        self.assertIn("22 warm-up / 0 timed", text)

    def test_paper_table_compares_the_three_systems_at_one_cap(self):
        text, results = self.render()
        batch = self.fixture("memory")["batches"][0]
        rows = [r for r in results["rows"] if "CodeAlpaca" in r["workload"]]
        self.assertEqual(len(rows), 3)
        # At half the peak neither static nor disc ran: the smallest cap both fit is used.
        self.assertTrue(all(r["cap_bytes"] == batch["equal_cap_bytes"] for r in rows))
        dynamic, static, disc = rows
        self.assertIn("exceeds the cap: its live peak is", dynamic["exceeds_cap"])
        self.assertGreater(static["tokens_per_s"], 0)
        self.assertGreater(disc["tokens_per_s"], 0)
        self.assertIn("exceeds the cap: its live peak is", text)

    def test_half_the_peak_is_the_cap_when_both_governed_systems_ran_there(self):
        memory = self.fixture("memory")
        batch = memory["batches"][0]
        done = next(r for r in batch["runs"] if r["ran"] and r["cap_bytes"] == batch["equal_cap_bytes"])
        for r in batch["runs"]:
            if r["cap_bytes"] == batch["half_cap_bytes"]:
                system = r["system"]
                r.clear()
                r.update(copy.deepcopy(done), system=system, cap_bytes=batch["half_cap_bytes"])
        cap, _ = bench_report.comparison_cap(batch)
        self.assertEqual(cap, batch["half_cap_bytes"])

    def test_the_cap_curve_is_an_svg_with_a_line_and_a_legend_per_system(self):
        self.render()
        svg = ET.parse(os.path.join(self.dir, "cap_curve.svg")).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        legend = [t.text for t in svg.iter(ns + "text")]
        series = bench_report.curve_series(self.fixture("memory"))
        for system in series:
            self.assertIn(system, legend)
        lines = sum(1 for points in series.values() if len(points) > 1)
        self.assertEqual(len(list(svg.iter(ns + "polyline"))), lines)
        points = sum(len(p) for p in series.values())
        self.assertEqual(len(list(svg.iter(ns + "circle"))), points)

    def test_without_pytorch_the_ratio_column_is_empty(self):
        step = self.fixture("step")
        del step["torch"]
        with open(os.path.join(self.dir, "step.json"), "w") as f:
            json.dump(step, f)
        text, results = self.render()
        self.assertFalse(any("PyTorch" in r["system"] for r in results["rows"]))
        self.assertTrue(all(r.get("vs_pytorch_eager") is None for r in results["rows"] if "B=8" in r["workload"]))


if __name__ == "__main__":
    unittest.main()
