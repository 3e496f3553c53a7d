#!/usr/bin/env bash
# The GPU bundle in a clean root: packs the bundle (scripts/gpu_bundle.sh) from an already-built CUDA build folder,
# checks the archive's size and unpacks it; then, in a mount namespace where every file that the Debian packages
# named in the bundle's MANIFEST installed on this machine (libraries, plugins, programs, help and configuration;
# not documentation) is hidden, checks that the system's copies are really unreadable there and runs the bundle's
# programs: a quick subset of the CPU test instances, the multi-rank suite's CPU instances on 1 rank and under the
# bundle's mpirun on 2 ranks, `nj convert` and `nj train --device cpu` on Cora, and `nj partition` followed by
# `mpirun -np 2 nj train --partitions`. Any of them failing fails the test.
#
# Usage: tests/bundle/bundle_test.sh BUILD_DIR [DATA_DIR]
#   DATA_DIR defaults to NJ_DATA_DIR, else ../shared/data beside the repository.
#   NJ_BUNDLE_TEST_REMOVE=PATH deletes PATH (relative to the unpacked bundle, e.g. lib/libmetis.so.5) before the
#   runs: the test must then fail, which shows that it sees a missing library.
# Exit status 77 (skipped): the build has no CUDA (no nvcc), or mount namespaces are not permitted here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
say() { echo "bundle_test: $*"; }
fail() { echo "bundle_test: FAILED: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------------------------------------------
# Inside the namespace: hide the packages' files, check that they are hidden, run the bundle.
# ---------------------------------------------------------------------------------------------------------------
if [[ ${1:-} == --inside ]]; then
  bundle="$2" hide_dirs="$3" hide_files="$4" work="$5"
  while IFS= read -r d; do mount -t tmpfs -o size=1m,mode=0755 none "$d"; done <"$hide_dirs"
  while IFS= read -r f; do mount --bind /dev/null "$f"; done <"$hide_files"
  say "hid $(wc -l <"$hide_dirs") folders and $(wc -l <"$hide_files") files"

  # The system's copies must be unreadable here, or the runs below could pass on them.
  metis=/usr/lib/x86_64-linux-gnu/libmetis.so.5
  if /lib64/ld-linux-x86-64.so.2 --list "$metis" >/dev/null 2>&1; then fail "$metis still loads in the namespace"; fi
  while IFS= read -r f; do [[ ! -s $f ]] || fail "$f is still readable in the namespace"; done <"$hide_files"
  while IFS= read -r d; do [[ -z $(ls -A "$d") ]] || fail "$d still lists files in the namespace"; done <"$hide_dirs"
  if /usr/bin/orterun --version >/dev/null 2>&1; then fail "the system's mpirun still runs in the namespace"; fi
  say "the system's copies are unreadable (e.g. $metis does not load)"

  # shellcheck source=/dev/null
  . "$bundle/lib/bundle-env.sh"
  nj_bundle_setup "$bundle"
  # Every library the bundle's programs load comes from the bundle, glibc and the CUDA folders aside.
  for elf in "$bundle"/bin/{nj,nj_tests,nj_mpi_tests,orterun,orted}; do
    ldd "$elf" >"$work/ldd.txt" 2>&1 || fail "ldd $elf: $(head -3 "$work/ldd.txt")"
    if grep -q "not found" "$work/ldd.txt"; then fail "$elf: $(grep "not found" "$work/ldd.txt" | head -3)"; fi
  done
  cd "$work"
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}" OMPI_MCA_mpi_yield_when_idle=1 NJ_DATA_DIR="$bundle/data"
  run() {  # run NAME COMMAND...: runs COMMAND, output to NAME.log, printed if it fails
    local name="$1" t0=$SECONDS
    shift
    if ! "$@" >"$work/$name.log" 2>&1; then
      tail -40 "$work/$name.log" >&2
      fail "$name: $*"
    fi
    say "passed: $name ($((SECONDS - t0)) s)"
  }
  # CPU instances of quick suites: kernels against references and OpenBLAS, the device emulation, the HDF5
  # format, budgeted training against full-graph training. Not the tests that run nj as a program: they run it
  # where the build put it (NJ_BINARY, compiled in), which is not the bundle; nj runs below instead.
  run cpu-tests "$bundle/bin/nj_tests" --gtest_brief=1 \
    --gtest_filter='*Kernel*/cpu*:BlasKernels.*:DatasetFile.*:*Arena*:*Exactness*/cpu_gcn2-BlasKernels.Nj*'
  run mpi-tests-1-rank "$bundle/bin/nj_mpi_tests" --gtest_brief=1 --gtest_filter='*/cpu*'
  run convert-cora "$bundle/nj" convert --format plain "$bundle/data/cora" --output cora.h5
  run train-cora "$bundle/nj" train cora.h5 --device cpu --epochs 5 --hidden 16
  grep -q "epoch" "$work/train-cora.log" || fail "nj train printed no epoch line"
  run mpi-tests-2-ranks "$bundle/mpirun" -np 2 --oversubscribe "$bundle/bin/nj_mpi_tests" --gtest_brief=1 \
    --gtest_filter='*MultiRank*/cpu*'
  run partition-cora "$bundle/nj" partition cora.h5 --parts 2 --method metis --output cora.parts
  run train-cora-2-ranks "$bundle/mpirun" -np 2 --oversubscribe "$bundle/nj" train --partitions cora.parts \
    --device cpu --epochs 3 --hidden 16
  say "every run of the bundle passed in the clean root"
  exit 0
fi

# ---------------------------------------------------------------------------------------------------------------
# Outside: pack, check the size, unpack, list what to hide, enter the namespace.
# ---------------------------------------------------------------------------------------------------------------
[[ $# -ge 1 && $# -le 2 ]] || { awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 2; }
build="$(realpath "$1")"
data="${2:-${NJ_DATA_DIR:-$root/../shared/data}}"
start=$SECONDS

[[ -x $build/nj ]] || fail "no nj in $build"
if ! readelf -d "$build/nj" | grep -q 'NEEDED.*libcudart'; then
  say "skipped: nvcc absent, the build in $build has no CUDA"
  exit 77
fi
unshare_cmd=(unshare -m)
[[ $(id -u) -eq 0 ]] || unshare_cmd=(unshare -r -m)
if ! "${unshare_cmd[@]}" sh -c 'mount -t tmpfs none /mnt' >/dev/null 2>&1; then
  say "skipped: unshare/mount namespaces not permitted here (${unshare_cmd[*]})"
  exit 77
fi

tmp="$(mktemp -d "${TMPDIR:-/tmp}/nj-bundle-test.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

say "packing the bundle from $build"
"$root/scripts/gpu_bundle.sh" "$tmp/bundle.tar.xz" --build "$build" --skip-build --data "$data"
size=$(stat -c %s "$tmp/bundle.tar.xz")
((size <= 40 * 1024 * 1024)) || fail "the archive is $size bytes, more than 40 MiB"
say "archive: $size bytes ($((SECONDS - start)) s so far)"
mkdir "$tmp/unpacked" "$tmp/work"
tar -C "$tmp/unpacked" -xf "$tmp/bundle.tar.xz"
bundle="$tmp/unpacked/nj-gpu-bundle"
[[ -x $bundle/nj && -x $bundle/mpirun && -x $bundle/gpu_check.sh && -f $bundle/MANIFEST.txt ]] ||
  fail "the unpacked bundle lacks its launchers or MANIFEST.txt"
if [[ -n ${NJ_BUNDLE_TEST_REMOVE:-} ]]; then
  say "removing $NJ_BUNDLE_TEST_REMOVE from the bundle (NJ_BUNDLE_TEST_REMOVE)"
  rm -f "$bundle/$NJ_BUNDLE_TEST_REMOVE"
fi

# What the packages in the MANIFEST installed here: every file but documentation, and the folders that only
# they fill, hidden whole.
mapfile -t packages < <(sed -n 's/^package \([^=]*\)=.*/\1/p' "$bundle/MANIFEST.txt")
((${#packages[@]} > 10)) || fail "the MANIFEST names only ${#packages[@]} packages"
private_dirs=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/lib/x86_64-linux-gnu/hdf5/openmpi
              /usr/lib/x86_64-linux-gnu/openblas-openmp /usr/lib/x86_64-linux-gnu/openblas-pthread
              /usr/share/openmpi /etc/openmpi)
: >"$tmp/hide-dirs"
for d in "${private_dirs[@]}"; do [[ -d $d ]] && echo "$d" >>"$tmp/hide-dirs"; done
dpkg -L "${packages[@]}" 2>/dev/null | grep -vE '^/usr/share/(doc|doc-base|man|info|lintian|locale|bug|gdb)/' |
  while IFS= read -r f; do
    [[ -d $f ]] && continue
    [[ -e $f ]] || continue
    real="$(readlink -f "$f")"
    [[ -f $real ]] || continue
    for d in "${private_dirs[@]}"; do [[ $real == "$d"/* ]] && continue 2; done
    echo "$real"
  done | sort -u >"$tmp/hide-files"
grep -q 'libmetis\.so' "$tmp/hide-files" || fail "libmetis is not among the files to hide"
# The check inside is meaningful only if the library loads out here.
/lib64/ld-linux-x86-64.so.2 --list /usr/lib/x86_64-linux-gnu/libmetis.so.5 >/dev/null ||
  fail "/usr/lib/x86_64-linux-gnu/libmetis.so.5 does not load even outside the namespace"

say "entering a mount namespace that hides ${#packages[@]} packages' files"
"${unshare_cmd[@]}" bash "$here/bundle_test.sh" --inside "$bundle" "$tmp/hide-dirs" "$tmp/hide-files" "$tmp/work"
say "passed in $((SECONDS - start)) s"
