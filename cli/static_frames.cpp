// Only in the fully static `railyard` (RAILYARD_CLI_STATIC): the linker sends crtbeginT.o's calls to
// __register_frame_info / __deregister_frame_info here (--wrap), and they do nothing.
//
// Why: a static executable starts with crtbeginT.o, which registers the whole .eh_frame with libgcc's
// unwinder. The first exception then sorts every FDE of the ~11 MB binary (~5 ms: --version, --help, a
// usage error or a 404 all throw). Left unregistered, the unwinder finds frames through dl_iterate_phdr and
// the binary-search table of PT_GNU_EH_FRAME (linked with --eh-frame-hdr), as in a dynamic executable.
// Exceptions work as before: tests/static_exceptions_check.cpp, linked the same way, throws and catches.
extern "C" void __wrap___register_frame_info(const void* /*begin*/, void* /*object*/) {}
extern "C" void* __wrap___deregister_frame_info(const void* /*begin*/) { return nullptr; }
