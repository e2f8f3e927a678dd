// Linked like the release `railyard` (railyard_link_static + railyard_fast_start, with the order file
// static_prefault_order.txt), and checked at main() for what that start-up layout promises:
//  1. one read-only, executable segment from the ELF header through the text; every PT_LOAD segment on a
//     2 MiB boundary, its file offset congruent (what lets the kernel map it with huge pages);
//  2. the order file applied: railyard_hot_text_begin, hot_work and railyard_hot_text_end side by side;
//  3. cli/prefault.cpp ran: a 1 MiB .bss array that nothing touched, and the heap glibc took before main(),
//     are resident (mincore), where without it they would not be.
// Exits 0 when all hold; prints each failure. Also prints how much of the text the kernel huge-mapped
// (depends on the file system and kernel, so informational).
#include <link.h>
#include <malloc.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

extern "C" {
extern char __executable_start[];
extern char etext[];
void railyard_hot_text_begin();
void railyard_hot_text_end();
__attribute__((noinline, used)) int hot_work(int n) { return n * 3 + 1; }
}

namespace {

constexpr std::uintptr_t kHuge = 2u << 20;
char untouched[1 << 20];  // .bss, never written

int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "static_prefault_check: %s\n", what);
    ++failures;
  }
}

bool resident(std::uintptr_t from, std::uintptr_t to) {
  const std::uintptr_t page = 4096;
  from &= ~(page - 1);
  std::vector<unsigned char> vec((to - from + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(from), to - from, vec.data()) != 0) return false;
  for (const unsigned char v : vec)
    if (!(v & 1)) return false;
  return true;
}

}  // namespace

int main() {
  const auto* phdr = reinterpret_cast<const ElfW(Phdr)*>(getauxval(AT_PHDR));
  const auto count = getauxval(AT_PHNUM);
  const auto image = reinterpret_cast<std::uintptr_t>(__executable_start);
  bool text_from_header = false;
  int loads = 0;
  for (unsigned long i = 0; i < count; ++i) {
    const auto& p = phdr[i];
    if (p.p_type != PT_LOAD) continue;
    ++loads;
    expect(p.p_vaddr % kHuge == 0, "a PT_LOAD segment does not start on a 2 MiB boundary");
    expect(p.p_vaddr % kHuge == p.p_offset % kHuge, "a PT_LOAD segment's offset is not congruent mod 2 MiB");
    if (p.p_vaddr == image && p.p_offset == 0 && (p.p_flags & PF_X) && !(p.p_flags & PF_W) &&
        p.p_vaddr + p.p_memsz >= reinterpret_cast<std::uintptr_t>(etext))
      text_from_header = true;
  }
  expect(loads >= 2, "fewer than two PT_LOAD segments");
  expect(text_from_header, "no read-only executable segment from the ELF header through the text");

  const auto begin = reinterpret_cast<std::uintptr_t>(&railyard_hot_text_begin);
  const auto end = reinterpret_cast<std::uintptr_t>(&railyard_hot_text_end);
  const auto work = reinterpret_cast<std::uintptr_t>(&hot_work);
  // Side by side in the order file's order (unordered, hot_work would sit apart: another object file).
  expect(begin < work && work < end && end - begin < 256, "the order file was not applied");

  expect(resident(reinterpret_cast<std::uintptr_t>(untouched),
                  reinterpret_cast<std::uintptr_t>(untouched) + sizeof untouched),
         "the untouched .bss is not resident: prefault did not run");
  const auto top = reinterpret_cast<std::uintptr_t>(sbrk(0));
  const std::uintptr_t arena = mallinfo2().arena;
  expect(arena > 0 && resident(top - arena, top), "the heap is not resident: prefault did not run");

  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  long pmd_kb = 0;
  while (std::getline(smaps, line))
    if (line.rfind("FilePmdMapped:", 0) == 0) pmd_kb += std::stol(line.substr(14));
  std::printf("static_prefault_check: %d PT_LOAD segments; %ld KiB of the file huge-mapped; %d failure(s)\n",
              loads, pmd_kb, failures);
  return failures == 0 && hot_work(1) == 4 ? 0 : 1;
}
