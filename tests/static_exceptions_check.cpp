// Linked like the release `railyard` (railyard_link_static: -static, crtbeginT.o's frame registration
// wrapped into no-ops). Exceptions must still unwind through ordinary frames, frames of the static C++
// runtime (std::stoi, std::function, std::vector::at), a rethrow and a destructor, and be caught by type.
// Exits 0 when every case caught what it should; a broken unwinder ends in std::terminate (SIGABRT).
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

int destroyed = 0;
struct Guard {
  ~Guard() { ++destroyed; }
};

[[gnu::noinline]] int deep(int n) {
  Guard g;
  if (n == 0) throw std::runtime_error("bottom");
  return deep(n - 1) + 1;
}

int failures = 0;
void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "static_exceptions_check: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  try {
    deep(20);
    expect(false, "deep() did not throw");
  } catch (const std::runtime_error& e) {
    expect(std::string(e.what()) == "bottom", "wrong message from deep()");
  }
  expect(destroyed == 21, "not every frame's destructor ran");

  try {
    (void)std::stoi("not a number");
    expect(false, "std::stoi did not throw");
  } catch (const std::invalid_argument&) {
  }

  std::function<void()> f = [] { (void)std::vector<int>(3).at(7); };
  try {
    f();
    expect(false, "vector::at did not throw");
  } catch (const std::out_of_range&) {
  }

  try {
    try {
      throw 42;
    } catch (int) {
      throw;
    }
  } catch (int v) {
    expect(v == 42, "rethrown value changed");
  }
  return failures == 0 ? 0 : 1;
}
