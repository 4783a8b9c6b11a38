// LeakSanitizer's suppressions for the GPU vendors' libraries that the tests load (NVRTC, the HIP
// runtime and hiprtc's compiler): each keeps allocations to the end of the process, such as the
// exception-handling pool of the C++ runtime it carries inside (72704 bytes), which a leak check
// at exit reports. They are not disc's; disc's own allocations stay checked. Linked into the
// test binaries that load them; without LeakSanitizer nothing calls this.
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libnvrtc\n"
         "leak:libamdhip64\n"
         "leak:libamd_comgr\n"
         "leak:libhsa-runtime64\n"
         "leak:libLLVM-15\n";
}
