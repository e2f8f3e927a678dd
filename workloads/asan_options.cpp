// Linked into the programs that call MPI_Init. Open MPI 4.1 leaks at MPI_Finalize from MCA components it
// has already dlclose()d, so LeakSanitizer reports frames it cannot name and no suppression can match
// them; with leak detection on, every sanitized MPI run would exit non-zero. Address and UB checks stay
// on, and the same training code is leak-checked by the unit tests, which do not use MPI.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
