#!/usr/bin/env bash
# Writes cli/hot-functions.txt: the functions the everyday `railyard` commands run, which the release link
# places side by side (lld --symbol-ordering-file; cli/CMakeLists.txt says why). Starts a 4-node local
# cluster from BUILD, runs each command below once under callgrind, and lists every function that ran:
# the submit's first, then what each later command adds. glibc picks its string functions by CPU at run
# time (AVX-512 here, AVX2 under valgrind), so every variant of one that ran is listed. Rerun after changes
# that rename or add much code on these paths, then rebuild the release `railyard`; a stale list only costs
# start-up time (names the binary lacks are skipped).
#
#   cli/hot-functions.sh [-b BUILD]     (default build/release; needs valgrind, installs it when missing)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$here/../build/release
while getopts "b:" opt; do
  case $opt in
    b) BUILD=$(realpath "$OPTARG") ;;
    *) sed -n '2,10p' "$0"; exit 2 ;;
  esac
done
cli=$BUILD/cli/railyard
[ -x "$cli" ] || { echo "hot-functions: $cli not found (build it first)" >&2; exit 3; }
if ! command -v valgrind >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind >/dev/null
fi
work=$(mktemp -d /tmp/hot-functions.XXXXXX)
trap '"$cli" down --state-dir "$work/cluster" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
exports=$("$cli" up --nodes 4 --profile dgx-h100 --port 0 --state-dir "$work/cluster" --no-config)
eval "$exports"

n=0
trace() {  # trace ARGS...: one command under callgrind; its output is not needed
  n=$((n + 1))
  valgrind --tool=callgrind --demangle=no --dump-before='*prefault*' \
    --callgrind-out-file="$work/cg.$(printf %02d $n)" \
    "$cli" "$@" >/dev/null 2>&1 || true
}
trace submit --gpus 1 -- true
job=$("$cli" submit --gpus 1 --name hot -- sleep 30)
trace queue
trace show "$job"
trace logs "$job"
trace cancel "$job"
trace submit --array 0-9 --gpus 1 -- true
trace submit --nodes 2 --gpus-per-node 8 --wait -- true
trace nodes
trace history
trace --version
trace submit --gpus 0 -- true  # a usage error

nm --defined-only "$cli" | python3 -c '
import re, sys, glob
text = [l.split()[2] for l in sys.stdin if len(l.split()) == 3 and l.split()[1] in "tTwWiI"]
variant = re.compile(r"^(__\w+?)_(sse2|ssse3|sse4_[12]|avx|avx2|evex|avx512)(_\w+)?$")
families = {}
for s in text:
    if m := variant.match(s):
        families.setdefault(m.group(1), []).append(s)
seen, order = set(), []
def add(name):  # a string function brings every variant of its family, next to it
    m = variant.match(name)
    for s in families.get(m.group(1), [name]) if m else [name]:
        if s not in seen:
            seen.add(s)
            order.append(s)
# cg.NN.1 is what ran before cli/prefault.cpp (glibc start-up), cg.NN the rest: start-up first, so that
# the pages touched before the prefault are few. Under valgrind the start-up differs a little: run natively
# it also calls the AVX-512 memset and strcmp and pthread_mutex_lock, which land further on.
for path in sorted(glob.glob(sys.argv[1] + "/cg.*"), key=lambda p: (p.split("/cg.")[1][:2], -len(p))):
    names = {}
    for line in open(path, errors="replace"):
        m = re.match(r"c?fn=\((\d+)\)(?: (.*))?", line)
        if not m:
            continue
        if m.group(2):
            names[m.group(1)] = m.group(2).split("\x27")[0]  # callgrind marks recursion as NAME\x272
        if line.startswith("fn="):
            add(names.get(m.group(1), ""))
have = set(text)
print("railyard_hot_text_begin")  # the range cli/prefault.cpp maps at start
for s in order:
    if s in have and not s.startswith("railyard_hot_text_"):
        print(s)
print("railyard_hot_text_end")
' "$work" > "$here/hot-functions.txt"
echo "hot-functions: $(wc -l < "$here/hot-functions.txt") functions in $here/hot-functions.txt" >&2
