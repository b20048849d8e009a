#!/usr/bin/env bash
# The one list of the Debian packages vitc uses, the probe that finds which are missing, and their
# install (as root).
#
#   tools/deps.sh [--install] GROUP...      groups: build test demo plots fuzz parity bench
#
# A package counts as present only when its probe passes: a header must compile with $CC (not
# merely preprocess to something), a library must link, a program must run. Without --install the
# script reports and exits 1 if anything is missing; with --install, as root, it runs
# "$APT update" once and "$APT install" of the missing packages, then probes again; as another
# user it prints the exact apt-get line and exits 1. APT=echo shows what would be run.
set -u
CC=${CC:-cc}
APT=${APT:-apt-get}
STB_INCLUDE=/usr/include/stb

install=0
if [ "${1:-}" = --install ]; then install=1; shift; fi
[ $# -gt 0 ] || { echo "usage: tools/deps.sh [--install] build|test|demo|plots|fuzz|parity|bench..." >&2; exit 2; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# compiles and links a program that includes $1 (space-separated headers) and takes the address of
# symbol $2, with the link flags in $3...
links() {
    local headers=$1 symbol=$2; shift 2
    : >"$tmp/probe.c"
    for h in $headers; do printf '#include <%s>\n' "$h" >>"$tmp/probe.c"; done
    printf 'int main(void) { return (int)(long)(void *)%s == 1; }\n' "$symbol" >>"$tmp/probe.c"
    # word splitting of $CC is wanted: CC may carry flags ("gcc -nostdinc")
    # shellcheck disable=SC2086
    $CC -I"$STB_INCLUDE" "$tmp/probe.c" -o "$tmp/probe" "$@" >/dev/null 2>&1
}

openblas_openmp_dir() { ls -d /usr/lib/*/openblas-openmp 2>/dev/null | head -n 1; }

# probe_<package>: exit 0 when the package's files work
probe_build_essential() { printf 'int main(void) { return 0; }\n' >"$tmp/cc.c" && $CC "$tmp/cc.c" -o "$tmp/cc" >/dev/null 2>&1; }
probe_libopenblas_openmp_dev() {
    local dir; dir=$(openblas_openmp_dir)
    [ -n "$dir" ] && links cblas.h cblas_sgemm -L"$dir" -lopenblas
}
probe_libstb_dev() { links "stdio.h stb_image.h stb_image_write.h" stbi_load_from_memory -lstb; }
probe_libcjson_dev() { links cjson/cJSON.h cJSON_Parse -lcjson; }
probe_libopenmpi_dev() {
    local dir; dir=$(ls -d /usr/lib/*/openmpi/include 2>/dev/null | head -n 1)
    [ -n "$dir" ] && links mpi.h MPI_Init -I"$dir" -lmpi
}
probe_openmpi_bin() { command -v mpirun >/dev/null; }
probe_gnuplot_nox() { command -v gnuplot >/dev/null; }
probe_dataset_fashion_mnist() { [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; }
probe_clang() { command -v clang >/dev/null; }
probe_libclang_rt_dev() {
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return (int)n * 0 + (d == 0); }\n' >"$tmp/fz.c" &&
        clang -fsanitize=fuzzer "$tmp/fz.c" -o "$tmp/fz" >/dev/null 2>&1
}
probe_python3_torch() { /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; }
probe_python3_venv() { /usr/bin/python3 -c 'import ensurepip, venv' >/dev/null 2>&1; }

group_packages() {
    case $1 in
    build) echo build-essential libopenblas-openmp-dev libstb-dev libcjson-dev libopenmpi-dev openmpi-bin ;;
    test) echo gnuplot-nox ;;             # the plot tests
    demo) echo dataset-fashion-mnist ;;
    plots) echo gnuplot-nox ;;
    fuzz) echo clang libclang-rt-dev ;;   # libFuzzer
    parity) echo python3-torch ;;         # the PyTorch references of tools/ref
    bench) echo python3-venv ;;           # the bench's virtual environment of PyPI's torch and timm
    *) echo "tools/deps.sh: unknown group '$1' (build test demo plots fuzz parity bench)" >&2; return 1 ;;
    esac
}

packages=()
for g in "$@"; do
    list=$(group_packages "$g") || exit 2
    for p in $list; do
        case " ${packages[*]} " in *" $p "*) ;; *) packages+=("$p") ;; esac
    done
done

missing_packages() {
    local p
    for p in "${packages[@]}"; do
        "probe_${p//-/_}" || printf '%s ' "$p"
    done
}

missing=$(missing_packages)
if [ -z "$missing" ]; then
    echo "vitc deps ($*): found ${packages[*]}"
    exit 0
fi
missing=${missing% }
echo "vitc deps ($*): missing Debian packages: $missing"
if [ $install = 0 ]; then
    echo "error: install them as root: apt-get install -y $missing (or run 'make deps' as root)" >&2
    exit 1
fi
if [ "$(id -u)" != 0 ]; then
    echo "error: installing packages needs root; run as root: apt-get install -y $missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
$APT update -qq && $APT install -y -qq $missing || { echo "error: '$APT install -y $missing' failed" >&2; exit 1; }
missing=$(missing_packages)
if [ -n "$missing" ]; then
    echo "error: still missing after the install: ${missing% } (their probes still fail with CC='$CC')" >&2
    exit 1
fi
echo "vitc deps ($*): installed and found ${packages[*]}"
