// Maps, at start, the memory a `railyard` call is about to touch, with one madvise each instead of a page
// fault per page (issue 11: scripts run one `railyard submit` per job). Part of railyard_fast_start
// (cli/CMakeLists.txt), which also lays the text out for huge pages.
//
// On the VMs we measure on, a page fault costs ~10 us (anonymous) to ~30 us (file, with fault-around),
// while MADV_POPULATE_* maps pages for ~0.5 us each. A submit took ~75 faults: ~17 in the malloc heap,
// ~15 copy-on-write in .data/.bss, ~30 in the text and read-only data. So, before any other constructor:
//   - the hot text, which the link places between railyard_hot_text_begin and _end (the first and last
//     names of cli/hot-functions.txt), and the read-only data from the ELF header up to the unwind tables:
//     read (quick where the kernel already maps them with huge pages);
//   - .data and .bss, and the heap glibc has taken so far (~130 KB, which a submit fills): write.
// Populating never changes what a page holds. It is skipped where the kernel lacks it (before Linux 5.14,
// EINVAL) or where the sentinels are out of order (a link without the order). What ran before this
// constructor (glibc's start-up) comes first in the order file, so it touches few pages.
#include <elf.h>
#include <link.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

extern "C" {
// Linker-defined: start of the image, start of .data (glibc's crt1), end of .bss.
extern char __executable_start[];
extern char __data_start[];
extern char _end[];

// Empty; only their addresses are used. noinline and used keep each its own section for the order file.
__attribute__((noinline, used)) void railyard_hot_text_begin() { asm volatile(""); }
__attribute__((noinline, used)) void railyard_hot_text_end() { asm volatile(""); }
}

namespace {

constexpr std::uintptr_t kPage = 4096;
constexpr std::uintptr_t kMaxHotText = 8u << 20;  // larger means the order was not applied

// Where the unwind tables start (PT_GNU_EH_FRAME), which the link places after .rodata; 0 if none.
std::uintptr_t eh_frame_start() {
  const auto* phdr = reinterpret_cast<const ElfW(Phdr)*>(getauxval(AT_PHDR));
  const auto count = getauxval(AT_PHNUM);
  for (unsigned long i = 0; phdr != nullptr && i < count; ++i)
    if (phdr[i].p_type == PT_GNU_EH_FRAME) return phdr[i].p_vaddr;
  return 0;
}

void populate(std::uintptr_t from, std::uintptr_t to, int advice) {
  from &= ~(kPage - 1);
  to = (to + kPage - 1) & ~(kPage - 1);
  if (to > from) madvise(reinterpret_cast<void*>(from), to - from, advice);  // a hint: errors are ignored
}

__attribute__((constructor(101))) void prefault() {
  const auto begin = reinterpret_cast<std::uintptr_t>(&railyard_hot_text_begin);
  const auto end = reinterpret_cast<std::uintptr_t>(&railyard_hot_text_end);
  if (end > begin && end - begin < kMaxHotText) {
    const auto rodata = reinterpret_cast<std::uintptr_t>(__executable_start);
    if (const auto eh = eh_frame_start(); eh > rodata && eh < begin) populate(rodata, eh, MADV_POPULATE_READ);
    populate(begin, end, MADV_POPULATE_READ);
  }
  populate(reinterpret_cast<std::uintptr_t>(__data_start), reinterpret_cast<std::uintptr_t>(_end),
           MADV_POPULATE_WRITE);
  const auto top = reinterpret_cast<std::uintptr_t>(sbrk(0));
  const std::uintptr_t arena = mallinfo2().arena;
  if (arena > 0 && arena < top) populate(top - arena, top, MADV_POPULATE_WRITE);
}

}  // namespace
