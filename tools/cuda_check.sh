#!/usr/bin/env bash
# Builds vitc with CUDA=1 and runs the CUDA kernel tests (tests/cuda): every kernel of src/cuda
# against its CPU reference in src/cpu. This checks the kernel layer only; there is no CUDA backend
# (training or eval on the GPU) yet.
#
# Without a GPU the real kernel tests are skipped, and the same tests run instead on the CPU
# emulation of CUDA in tests/cuda/emu (test_cuda_emu): that checks the kernels' logic (indexing,
# reductions, += versus =, the cuBLAS argument mapping), not that they run right on a GPU. The
# summary says which of the two happened.
#
#   tools/cuda_check.sh [test filter]
#   JOBS=N          make -jN (default 2)
#   TEST_CUDA=PATH  run this prebuilt test binary instead of building (e.g. one built elsewhere)
#   SANITIZE=0      skip the compute-sanitizer runs (memcheck, racecheck, synccheck) on a GPU
set -u
cd "$(dirname "$0")/.." || exit 1

build=${BUILD:-build/release_cuda}
bin=${TEST_CUDA:-}
emu=$build/test_cuda_emu
if [ -z "$bin" ]; then
    bin=$build/test_cuda
    make CUDA=1 BUILD="$build" -j"${JOBS:-2}" "$bin" "$emu" || { echo "cuda_check: the CUDA=1 build failed"; exit 1; }
fi

log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
echo "== $bin"
"$bin" "$@" | tee "$log"
rc=${PIPESTATUS[0]}

device=$(sed -n 's/^device: //p' "$log")
passed=$(grep -c '^ok ' "$log")
failed=$(grep -c '^FAIL ' "$log")
skipped=$(grep -c '^SKIP ' "$log")

hidden="not run (no GPU here: the run above took that path)"
emulated="not run (a GPU ran the kernels)"
sanitizer=" not run"
if [ "$skipped" -eq 0 ] && [ "$passed" -gt 0 ]; then
    # with a GPU, the no-device path too: hidden GPUs must give the clear refusal, not an abort
    if CUDA_VISIBLE_DEVICES= "$bin" cuda_select >"$log" 2>&1 && grep -q '^ok   cuda_select' "$log" &&
        grep -q 'no CUDA device' "$log"; then
        hidden="ok ($(sed -n 's/^ *message: //p' "$log"))"
    else
        hidden="FAILED"
        cat "$log"
        rc=1
    fi
    # what the emulation cannot see: out-of-bounds device accesses, shared-memory races, barriers
    cs=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer
    if [ "${SANITIZE:-1}" = 1 ] && [ -x "$cs" ]; then
        sanitizer=""
        for tool in memcheck racecheck synccheck; do
            if "$cs" --tool "$tool" --error-exitcode 9 "$bin" "$@" >"$log" 2>&1; then
                sanitizer="$sanitizer $tool ok"
            else
                sanitizer="$sanitizer $tool FAILED"
                tail -30 "$log"
                rc=1
            fi
        done
    fi
elif [ -x "$emu" ]; then
    echo "== $emu (CPU emulation of CUDA, not a GPU)"
    "$emu" "$@" | tee "$log"
    emu_rc=${PIPESTATUS[0]}
    emulated="$(grep -c '^ok ' "$log") passed, $(grep -c '^FAIL ' "$log") failed"
    if [ "$emu_rc" -ne 0 ]; then
        emulated="$emulated, exit $emu_rc"
        rc=1
    fi
fi

echo
echo "cuda_check summary (kernel layer only, not a CUDA backend)"
echo "  device:           $device"
echo "  on the device:    $passed passed, $failed failed, $skipped skipped"
echo "  GPUs hidden:      $hidden"
echo "  emulated on CPU:  $emulated"
echo "  sanitizer:       $sanitizer"
if [ "$rc" -ne 0 ]; then
    echo "  result:           FAILED"
    exit 1
fi
if [ "$skipped" -gt 0 ]; then
    echo "  result:           no GPU: the kernels' logic passed on the CPU emulation; not run on a GPU"
else
    echo "  result:           every kernel matches the CPU within 1e-5 on the GPU"
fi
