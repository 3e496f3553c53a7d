#!/usr/bin/env bash
# Packs the GPU check for a GPU machine that has the NVIDIA driver, the CUDA toolkit and Python, but none of the
# project's Debian packages, no package manager and no network: one archive that unpacks into one relocatable
# folder holding nj, nj_tests and nj_mpi_tests (stripped), the Cora, CiteSeer and Slashdot files the GPU test
# instances read, Open MPI with its launcher, plugins and help files, PMIx, and every other shared library these
# load, taken from Debian's .deb packages (apt-get download, dpkg-deb -x) rather than from this machine's /usr, so
# that a clean root proves the bundle complete (tests/bundle/bundle_test.sh). The CUDA runtime, cuBLAS, cuSPARSE,
# nvJitLink and NCCL are not in it: its launchers find them on the target (docs/cuda.md, "The GPU bundle").
#
# Usage: scripts/gpu_bundle.sh OUT.tar.xz|OUT.tar.gz [--build build-bundle] [--skip-build] [--data ../shared/data]
#                              [--jobs N] [--debs DIR]
#   --build DIR    the build folder: configured and built here (CUDA on, NJ_NATIVE off, warnings as errors)
#                  unless --skip-build, which packs what DIR already holds
#   --data DIR     the shared data folder (cora/ is required; citeseer/ and snap/soc-Slashdot0902.txt.gz are
#                  packed where present)
#   --debs DIR     where downloaded .deb files are kept for the next run (default: DIR/bundle-debs of --build)
# The archive must stay within 40 MiB; the script fails where it would not.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="nj-gpu-bundle"
limit_mib=40
die() { echo "gpu_bundle.sh: $*" >&2; exit 1; }

out=""
build="$root/build-bundle"
data="$root/../shared/data"
jobs="$(nproc)"
skip_build=0
debs=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) [[ $# -ge 2 ]] || die "--build needs a folder"; build="$(realpath -m "$2")"; shift 2 ;;
    --data) [[ $# -ge 2 ]] || die "--data needs a folder"; data="$(realpath -m "$2")"; shift 2 ;;
    --debs) [[ $# -ge 2 ]] || die "--debs needs a folder"; debs="$(realpath -m "$2")"; shift 2 ;;
    --jobs) [[ $# -ge 2 ]] || die "--jobs needs a number"; jobs="$2"; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$0"; exit 0 ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) [[ -z $out ]] || die "one archive only ('$out' and '$1')"; out="$(realpath -m "$1")"; shift ;;
  esac
done
[[ -n $out ]] || die "no archive named (see --help)"
case "$out" in
  *.tar.xz|*.txz) compress=(xz -T0 -6) ;;
  *.tar.gz|*.tgz) compress=(gzip -9) ;;
  *) die "the archive's name must end in .tar.xz or .tar.gz: $out" ;;
esac
debs="${debs:-$build/bundle-debs}"
[[ -d $data/cora ]] || die "no Cora plain export in $data/cora (use --data)"
for tool in dpkg dpkg-deb apt-get ldd readelf strings strip "${compress[0]}"; do
  command -v "$tool" >/dev/null || die "$tool is missing (a Debian machine with scripts/setup.sh run is assumed)"
done
start=$(date +%s)
elapsed() { echo "$(( $(date +%s) - start )) s"; }

if [[ $skip_build -eq 0 ]]; then
  echo "gpu_bundle.sh: building nj, nj_tests and nj_mpi_tests in $build"
  # NJ_NATIVE=OFF: the GPU machine's CPU is not this one, and -march=native code could stop there on an
  # illegal instruction.
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNJ_ENABLE_CUDA=ON -DNJ_NATIVE=OFF \
    -DNJ_WARNINGS_AS_ERRORS=ON >/dev/null
  cmake --build "$build" --parallel "$jobs" --target nj nj_tests nj_mpi_tests
  echo "gpu_bundle.sh: built in $(elapsed)"
fi
programs=("$build/nj" "$build/tests/nj_tests" "$build/tests/nj_mpi_tests")
for p in "${programs[@]}"; do [[ -x $p ]] || die "$p is missing (build first, or drop --skip-build)"; done
readelf -d "$build/nj" | grep -q 'NEEDED.*libcudart' ||
  die "$build/nj has no CUDA backend (configure with -DNJ_ENABLE_CUDA=ON where nvcc is found)"

work="$(mktemp -d "${TMPDIR:-/tmp}/nj-bundle.XXXXXX")"
trap 'rm -rf "$work"' EXIT
bundle="$work/$name"
mkdir -p "$bundle"/{bin,lib/openmpi,lib/pmix,share/openmpi,share/pmix,etc/openmpi,bench,data}

# ---- what is needed: the programs, Open MPI's launcher and daemon, its plugins and PMIx's, and what they load --
command -v ompi_info >/dev/null || die "ompi_info is missing (openmpi-bin)"
ompi_path() { ompi_info --parsable --path "$1" | sed -n "s/^path:$1://p" | head -1; }
ompi_pkglibdir="$(ompi_path pkglibdir)"
ompi_pkgdatadir="$(ompi_path pkgdatadir)"
ompi_sysconfdir="$(ompi_path sysconfdir)"
ompi_bindir="$(ompi_path bindir)"
launchers=(orterun orted ompi_info)
# Plugins for networks this bundle does not carry the libraries of (UCX, libfabric, PSM, InfiniBand verbs,
# netlink) and OpenSHMEM's (liboshmem) stay out; the rest of Open MPI's plugins go in.
unneeded='lib(ucp|ucs|uct|ucm|fabric|ibverbs|rdmacm|efa|psm|psm2|psm_infinipath|infinipath|nl-3|nl-route-3|oshmem'
unneeded+='|numa)\.so|libmca_common_(ucx|ofi|verbs)\.so'
plugins=()
excluded_plugins=()
for plugin in "$ompi_pkglibdir"/mca_*.so; do
  deps="$(ldd "$plugin")"  # captured first: grep -q ending the pipe early would fail it under pipefail
  if grep -Eq "$unneeded" <<<"$deps"; then
    excluded_plugins+=("$(basename "$plugin")")
  else
    plugins+=("$plugin")
  fi
done
# PMIx is Debian's external one; its plugins sit beside the library Open MPI's pmix plugin loads.
libpmix="$(ldd "$ompi_pkglibdir/mca_pmix_ext3x.so" | awk '$1 == "libpmix.so.2" {print $3}')"
[[ -n $libpmix ]] || die "Open MPI's mca_pmix_ext3x.so loads no libpmix.so.2"
pmix_libdir="$(dirname "$(readlink -f "$libpmix")")"
pmix_plugins=("$pmix_libdir"/pmix/*.so)
[[ -e ${pmix_plugins[0]} ]] || die "no PMIx plugins in $pmix_libdir/pmix"
pmix_helpdir="$(dirname "$pmix_libdir")/share/pmix"

# glibc is the target's own (the bundle records the version it needs); the CUDA libraries are found on the target.
glibc='^(linux-vdso\.so|ld-linux-x86-64\.so|libc\.so|libm\.so|libmvec\.so|libdl\.so|libpthread\.so|librt\.so'
glibc+='|libresolv\.so|libutil\.so|libanl\.so|libnss_|libthread_db\.so)'
cuda='^lib(cudart|cublas|cublasLt|cusparse|nvJitLink|nccl|nvrtc)\.so'
driver='^lib(cuda|nvidia-ml)\.so'  # the driver's own, found by the system's loader
declare -A lib_path=()   # soname -> the file this machine resolves it to
declare -A cuda_libs=()
roots=("${programs[@]}")
for l in "${launchers[@]}"; do roots+=("$(readlink -f "$ompi_bindir/$l")"); done
roots+=("${plugins[@]}" "${pmix_plugins[@]}")
for elf in "${roots[@]}"; do
  while read -r soname arrow path _; do
    [[ $arrow == "=>" ]] || continue
    [[ $soname =~ $glibc || $soname =~ $driver ]] && continue
    if [[ $soname =~ $cuda ]]; then cuda_libs[$soname]=1; continue; fi
    [[ $path == "not" ]] && die "$elf needs $soname, which this machine lacks"
    lib_path[$soname]="$(readlink -f "$path")"
  done < <(ldd "$elf")
done
# nj opens cuBLAS and cuSPARSE at run time (dlopen), so ldd lists neither them nor the CUDA libraries they load: their
# names come from the binary, and what they load from ldd on this machine's copies, beside the CUDA runtime.
cudart_dir="$(ldd "$build/nj" | awk '$1 ~ /^libcudart\.so/ {print $3}' | xargs -r dirname)"
[[ -n $cudart_dir ]] || die "$build/nj does not load the CUDA runtime"
for lib in $(strings -a "$build/nj" | grep -oE '^lib(cublas|cusparse)\.so\.[0-9]+$' | sort -u); do
  cuda_libs[$lib]=1
  while read -r soname arrow _; do
    [[ $arrow == "=>" && $soname =~ $cuda ]] && cuda_libs[$soname]=1
  done < <(ldd "$cudart_dir/$lib")
done
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcusparse.so.12 libnvJitLink.so.13 libnccl.so.2; do
  [[ -n ${cuda_libs[$lib]:-} ]] || echo "gpu_bundle.sh: note: nj does not load $lib (a different CUDA?)" >&2
done

# ---- which Debian package holds each file ----
help_files=("$ompi_pkgdatadir"/help-*.txt "$pmix_helpdir"/help-*.txt)
needed=("${lib_path[@]}" "${plugins[@]}" "${pmix_plugins[@]}" "${help_files[@]}"
        "$ompi_sysconfdir/openmpi-mca-params.conf" "$ompi_sysconfdir/openmpi-default-hostfile")
for l in "${launchers[@]}"; do needed+=("$(readlink -f "$ompi_bindir/$l")"); done
merged() {  # the other side of the /usr merge of a path
  case "$1" in
    /usr/lib/*|/usr/bin/*|/usr/sbin/*) echo "${1#/usr}" ;;
    /lib/*|/bin/*|/sbin/*) echo "/usr$1" ;;
    *) echo "$1" ;;
  esac
}
queries=()
for f in "${needed[@]}"; do queries+=("$f" "$(merged "$f")"); done
# One dpkg -S for all the files: each call reads dpkg's whole database.
declare -A owner_of=()
while IFS= read -r line; do
  [[ $line == diversion* || $line != *": /"* ]] && continue
  owners="${line%%: /*}"
  owner_of["/${line#*: /}"]="${owners%%, *}"
done < <(dpkg -S "${queries[@]}" 2>/dev/null || true)
declare -A pkg_of=()     # system file -> package (name, or name:arch for Multi-Arch: same)
declare -A packages=()   # package -> version packed
declare -A installed=()  # package -> version installed here
for f in "${needed[@]}"; do
  p="${owner_of[$f]:-${owner_of[$(merged "$f")]:-}}"
  [[ -n $p ]] || die "no Debian package installed $f"
  pkg_of[$f]="$p"
  packages[$p]=""
done
while IFS='=' read -r p v; do
  [[ -n ${packages[$p]+set} ]] && packages[$p]="$v" installed[$p]="$v"
done < <(dpkg-query -W -f='${binary:Package}=${Version}\n' "${!packages[@]}")
for p in "${!packages[@]}"; do [[ -n ${packages[$p]} ]] || die "dpkg-query knows no version of $p"; done
echo "gpu_bundle.sh: ${#lib_path[@]} libraries, ${#plugins[@]} Open MPI and ${#pmix_plugins[@]} PMIx plugins" \
  "from ${#packages[@]} Debian packages"

# ---- download and unpack those packages (patchelf too, a tool here, not part of the bundle) ----
mkdir -p "$debs"
apt_opts=(-q)
# As root, apt drops to the _apt user, who may not write to the cache folder.
[[ $(id -u) -eq 0 ]] && apt_opts+=(-o APT::Sandbox::User=root)
deb_file() {  # the cached .deb of package $1 (name or name:arch) at version $2, if there
  local f
  for f in "$debs/${1%%:*}_${2//:/%3a}_"*.deb; do
    if [[ -f $f ]]; then echo "$f"; return 0; fi
  done
  return 1
}
candidate() { apt-cache policy "$1" | sed -n 's/^ *Candidate: //p' | grep -v '(none)'; }
if ! command -v patchelf >/dev/null; then
  v="$(candidate patchelf)" ||
    { [[ $(id -u) -eq 0 ]] && apt-get -qq update >/dev/null && apt_updated=1 && v="$(candidate patchelf)"; } ||
    die "patchelf is neither installed nor known to apt (apt-get update?)"
  packages[patchelf]="$v"
fi
take_candidate() {  # packs the archive's version of package $1 instead of the one installed here
  local v
  v="$(candidate "$1")" && [[ $v != "${packages[$1]}" ]] || return 1
  echo "gpu_bundle.sh: note: the archive no longer has $1=${packages[$1]} (installed here); packing $v" >&2
  packages[$1]="$v"
}
while true; do
  missing=()
  for p in "${!packages[@]}"; do
    deb_file "$p" "${packages[$p]}" >/dev/null && continue
    # Downloaded by an earlier run that found the installed version gone.
    v="$(candidate "$p")" && [[ $v != "${packages[$p]}" ]] && deb_file "$p" "$v" >/dev/null && take_candidate "$p" &&
      continue
    missing+=("$p=${packages[$p]}")
  done
  ((${#missing[@]} > 0)) || break
  echo "gpu_bundle.sh: downloading ${#missing[@]} packages into $debs"
  (cd "$debs" && apt-get "${apt_opts[@]}" download "${missing[@]}" >/dev/null 2>"$work/apt.err") && continue
  # A version a later point release replaced is gone from the archive: take the archive's (same ABI).
  mapfile -t gone < <(sed -n "s/^E: Can't find a source to download version '.*' of '\(.*\)'$/\1/p" "$work/apt.err")
  if ((${#gone[@]} == 0)); then
    # Package lists never fetched or cleaned away (container images do): fetch them once, as root.
    if [[ $(id -u) -eq 0 && -z ${apt_updated:-} ]] && grep -q "Unable to locate package" "$work/apt.err"; then
      echo "gpu_bundle.sh: apt knows no such packages; running apt-get update"
      apt-get -qq update >/dev/null && apt_updated=1 && continue
    fi
    die "apt-get download failed: $(grep -m1 '^E:' "$work/apt.err" || tail -1 "$work/apt.err")"
  fi
  for p in "${gone[@]}"; do
    [[ -n ${packages[$p]+set} ]] || die "apt-get download: no $p in the archive"
    take_candidate "$p" ||
      die "apt-get download: the archive has no $p=${packages[$p]} and nothing else to take (apt-get update?)"
  done
done
x="$work/debs"
for p in "${!packages[@]}"; do
  f="$(deb_file "$p" "${packages[$p]}")" || die "no .deb of $p=${packages[$p]} in $debs"
  mkdir -p "$x/$p"
  dpkg-deb -x "$f" "$x/$p"
done
patchelf=patchelf
if [[ -n ${packages[patchelf]:-} && -z ${installed[patchelf]:-} ]]; then
  patchelf="$x/patchelf/usr/bin/patchelf"
  unset 'packages[patchelf]'
fi

# The copy of system file $1 inside its unpacked package (the file itself, not a link to it).
from_deb() {
  local f="$1" p="${pkg_of[$1]}" c
  for c in "$x/$p$f" "$x/$p${f#/usr}" "$x/$p/usr$f"; do
    if [[ -e $c ]]; then readlink -f "$c"; return 0; fi
  done
  die "$p's package has no $f"
}
declare -A files=()  # bundle path -> "package system-path"
put() {  # put SYSTEM_FILE BUNDLE_PATH
  cp "$(from_deb "$1")" "$bundle/$2"
  files[$2]="${pkg_of[$1]} $1"
}
for soname in "${!lib_path[@]}"; do put "${lib_path[$soname]}" "lib/$soname"; done
for l in "${launchers[@]}"; do put "$(readlink -f "$ompi_bindir/$l")" "bin/$l"; done
for f in "${plugins[@]}"; do put "$f" "lib/openmpi/$(basename "$f")"; done
for f in "${pmix_plugins[@]}"; do put "$f" "lib/pmix/$(basename "$f")"; done
for f in "$ompi_pkgdatadir"/help-*.txt; do put "$f" "share/openmpi/$(basename "$f")"; done
for f in "$pmix_helpdir"/help-*.txt; do put "$f" "share/pmix/$(basename "$f")"; done
put "$ompi_sysconfdir/openmpi-mca-params.conf" etc/openmpi/openmpi-mca-params.conf
put "$ompi_sysconfdir/openmpi-default-hostfile" etc/openmpi/openmpi-default-hostfile
for p in "${programs[@]}"; do
  cp "$p" "$bundle/bin/"
  strip "$bundle/bin/$(basename "$p")"
  files[bin/$(basename "$p")]="built $p"
done
# Run paths: every ELF finds the bundle's libraries beside it, wherever the folder is unpacked. DT_RPATH rather
# than DT_RUNPATH: it is searched before LD_LIBRARY_PATH, so that a machine's own Open MPI or HDF5 named there
# (HPC images often do) cannot stand in for the bundle's, while the CUDA libraries, absent here, still come from
# LD_LIBRARY_PATH.
chmod u+w -R "$bundle"
set_rpath() { "$patchelf" --force-rpath --set-rpath "$1" "$2"; }
# shellcheck disable=SC2016  # $ORIGIN is the loader's, not the shell's
origin='$ORIGIN'
for f in "$bundle"/bin/*; do set_rpath "$origin/../lib" "$f"; done
for f in "$bundle"/lib/*.so*; do set_rpath "$origin" "$f"; done
for f in "$bundle"/lib/openmpi/*.so "$bundle"/lib/pmix/*.so; do set_rpath "$origin/.." "$f"; done

# Every library an ELF of the bundle loads must now come from the bundle, glibc and CUDA aside.
cuda_dirs="$(for l in "${!cuda_libs[@]}"; do ldd "$build/nj" | awk -v l="$l" '$1 == l {print $3}'; done |
  xargs -r -n1 dirname | sort -u | paste -sd:)"
while IFS= read -r elf; do
  while read -r soname arrow path _; do
    [[ $arrow == "=>" ]] || continue
    [[ $soname =~ $glibc || $soname =~ $cuda || $soname =~ $driver ]] && continue
    [[ $path != "not" ]] || die "bundle's ${elf#"$bundle"/} needs $soname, which the bundle lacks"
    [[ $path == "$bundle"/* ]] || die "bundle's ${elf#"$bundle"/} loads $soname from $path, not from the bundle"
  done < <(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$cuda_dirs" ldd "$elf")
done < <(find "$bundle/bin" "$bundle/lib" -type f)
glibc_needed="$(find "$bundle/bin" "$bundle/lib" -type f -exec readelf -V {} + 2>/dev/null |
  grep -oE 'GLIBC_2\.[0-9]+' | sort -uV | tail -1)"
glibc_needed="${glibc_needed#GLIBC_}"

# ---- data, scripts, launchers ----
cp -r "$data/cora" "$bundle/data/cora"
data_note="cora"
[[ -d $data/citeseer ]] && { cp -r "$data/citeseer" "$bundle/data/citeseer"; data_note+=", citeseer"; }
if [[ -f $data/snap/soc-Slashdot0902.txt.gz ]]; then
  mkdir -p "$bundle/data/snap"
  cp "$data/snap/soc-Slashdot0902.txt.gz" "$bundle/data/snap/"
  data_note+=", snap/soc-Slashdot0902.txt.gz"
fi
[[ $data_note == *Slashdot* && $data_note == *citeseer* ]] ||
  echo "gpu_bundle.sh: note: $data lacks citeseer/ or snap/soc-Slashdot0902.txt.gz;" \
    "the GPU test instances that read them fail" >&2
chmod -R u+w "$bundle/data"
cp "$root/scripts/gpu_check.sh" "$bundle/gpu_check.sh"
cp "$root/scripts/bench/gpu_check.py" "$root/scripts/bench/nj_bench.py" "$bundle/bench/"

cat >"$bundle/lib/bundle-env.sh" <<EOF
# Sourced by the bundle's launchers (nj, mpirun, gpu_check.sh): checks glibc, finds the CUDA libraries on this
# machine and points Open MPI and PMIx at the bundle. The bundle's own libraries are found through run paths, so
# LD_LIBRARY_PATH gets only the CUDA folders, and programs outside the bundle keep this machine's libraries.
nj_bundle_cuda_libs=(${!cuda_libs[*]})
nj_bundle_glibc=$glibc_needed
EOF
cat >>"$bundle/lib/bundle-env.sh" <<'EOF'
nj_bundle_setup() {
  local root="$1"
  [[ ${NJ_BUNDLE_ROOT:-} == "$root" ]] && return 0
  local have
  have="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')" || true
  if [[ -n $have && $(printf '%s\n%s\n' "$nj_bundle_glibc" "$have" | sort -V | head -1) != "$nj_bundle_glibc" ]]; then
    echo "nj bundle: needs glibc $nj_bundle_glibc or newer; this machine has $have" >&2
    return 1
  fi
  # Where the CUDA libraries may be: the toolkit, then the nvidia/*/lib folders of every Python's site-packages
  # (the nvidia-* wheels).
  local dirs=() d py sp seen=" "
  [[ -n ${CUDA_HOME:-} ]] && dirs+=("$CUDA_HOME/lib64" "$CUDA_HOME/lib")
  [[ -n ${CUDA_PATH:-} ]] && dirs+=("$CUDA_PATH/lib64" "$CUDA_PATH/lib")
  dirs+=(/usr/local/cuda/lib64 /usr/local/cuda/lib)
  for py in ${VIRTUAL_ENV:+"$VIRTUAL_ENV/bin/python3"} /opt/torch/.venv/bin/python3 $(type -ap python3 2>/dev/null); do
    [[ -x $py && $seen != *" $py "* ]] || continue
    seen+="$py "
    while IFS= read -r sp; do
      for d in "$sp"/nvidia/*/lib; do [[ -d $d ]] && dirs+=("$d"); done
    done < <("$py" -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null || true)
  done
  local lib found path=""
  for lib in "${nj_bundle_cuda_libs[@]}"; do
    found=""
    for d in "${dirs[@]}"; do
      if [[ -e $d/$lib ]]; then found="$d"; break; fi
    done
    if [[ -z $found ]]; then
      echo "nj bundle: $lib not found (looked in CUDA_HOME, /usr/local/cuda/lib64, /usr/local/cuda/lib" \
        "and each python3's site-packages/nvidia/*/lib)" >&2
      return 1
    fi
    echo "nj bundle: $lib from $found" >&2
    [[ ":$path:" == *":$found:"* ]] || path="${path:+$path:}$found"
  done
  export LD_LIBRARY_PATH="$path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # Debian's Open MPI relocates with OPAL_PREFIX; the folders that do not follow the prefix are named too.
  export OPAL_PREFIX="$root" OPAL_EXEC_PREFIX="$root" OPAL_BINDIR="$root/bin" OPAL_LIBDIR="$root/lib" \
    OPAL_PKGLIBDIR="$root/lib/openmpi" OPAL_DATAROOTDIR="$root/share" OPAL_DATADIR="$root/share" \
    OPAL_PKGDATADIR="$root/share/openmpi" OPAL_SYSCONFDIR="$root/etc/openmpi"
  # PMIx: its install folders, and its plugin path, which Debian's pmix-mca-params.conf fixes to /usr.
  export PMIX_PREFIX="$root" PMIX_EXEC_PREFIX="$root" PMIX_LIBDIR="$root/lib" PMIX_PKGLIBDIR="$root/lib/pmix" \
    PMIX_DATAROOTDIR="$root/share" PMIX_DATADIR="$root/share" PMIX_PKGDATADIR="$root/share/pmix" \
    PMIX_SYSCONFDIR="$root/etc" PMIX_MCA_mca_base_component_path="$root/lib/pmix"
  # hwloc's optional plugins (CUDA, NVML, OpenCL) are not in the bundle; a system's would not match.
  export HWLOC_PLUGINS_PATH="$root/lib/hwloc"
  export PATH="$root:$root/bin:$PATH"
  # The GPU machines run everything as root, which mpirun refuses unless told.
  if [[ $(id -u) -eq 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
  # Sandboxes and containers may refuse the cross-memory attach (process_vm_readv) that the shared-memory
  # transport uses for large messages; copying through the shared segment works everywhere.
  export OMPI_MCA_btl_vader_single_copy_mechanism="${OMPI_MCA_btl_vader_single_copy_mechanism:-none}"
  export NJ_BUNDLE_ROOT="$root"
  local driver
  driver="$( (/sbin/ldconfig -p 2>/dev/null || ldconfig -p 2>/dev/null) |
    awk '$1 == "libcuda.so.1" {print $NF; exit}')" || true
  if [[ -z $driver ]]; then
    for d in ${LD_LIBRARY_PATH//:/ }; do [[ -e $d/libcuda.so.1 ]] && { driver="$d/libcuda.so.1"; break; }; done
  fi
  echo "nj bundle: libcuda.so.1 (NVIDIA driver) ${driver:+from $driver}${driver:-not found: nj sees no GPU}" >&2
}
EOF

for launcher in nj:bin/nj mpirun:bin/orterun; do
  cat >"$bundle/${launcher%%:*}" <<EOF
#!/usr/bin/env bash
# The bundle's ${launcher%%:*}: sets up the environment (lib/bundle-env.sh), then runs ${launcher#*:}.
set -e
here="\$(dirname "\$(readlink -f "\${BASH_SOURCE[0]}")")"
. "\$here/lib/bundle-env.sh"
nj_bundle_setup "\$here" || exit 1
exec "\$here/${launcher#*:}" "\$@"
EOF
  chmod +x "$bundle/${launcher%%:*}"
done
# Names the tests and scripts call through PATH.
ln -s orterun "$bundle/bin/mpirun"

# The commit, marked where the tree held changes not committed (--no-optional-locks: read, never write, the index).
commit="$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)"
[[ -z $(git -C "$root" --no-optional-locks status --porcelain --untracked-files=no 2>/dev/null) ]] ||
  commit+=" with uncommitted changes"
cat >"$bundle/README.txt" <<EOF
NeutronJittor GPU check bundle (commit $commit).
Needs: Linux x86_64 with glibc $glibc_needed or newer, the NVIDIA driver, the CUDA 13 toolkit or the nvidia-* wheels
(${!cuda_libs[*]}), bash and python3 (standard library only).
  ./gpu_check.sh --bundle .        GPU tests on 1 and 2 ranks, CPU-against-GPU loss traces, epoch timings;
                                   log and CSV in ./gpu-check-out (--out DIR), ./gpu_check.sh --help for more
  ./nj --help, ./mpirun -np 2 ./nj train ...   the programs, with their environment set
MANIFEST.txt lists the Debian packages and files inside; docs/cuda.md of the project describes the bundle.
EOF

{
  echo "# NeutronJittor GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) from commit $commit"
  echo "# glibc: the target's own, version $glibc_needed or newer"
  echo "# cuda (found on the target): ${!cuda_libs[*]}"
  echo "# data: $data_note"
  echo "# Open MPI plugins left out (their network libraries are not here): ${excluded_plugins[*]}"
  echo "# package NAME:ARCH=VERSION, Debian packages the files below come from"
  for p in "${!packages[@]}"; do
    note=""
    [[ ${installed[$p]:-} == "${packages[$p]}" ]] || note=" (installed here: ${installed[$p]:-none})"
    echo "package $p=${packages[$p]}$note"
  done | sort
  echo "# file PATH PACKAGE SYSTEM-PATH (or: built BUILD-PATH)"
  for f in "${!files[@]}"; do echo "file $f ${files[$f]}"; done | sort
} >"$bundle/MANIFEST.txt"

# ---- the archive ----
mkdir -p "$(dirname "$out")"
tar -C "$work" --owner=0 --group=0 --numeric-owner -cf - "$name" | "${compress[@]}" >"$work/archive"
size=$(stat -c %s "$work/archive")
((size <= limit_mib * 1024 * 1024)) ||
  die "the archive is $((size / 1024 / 1024)) MiB, more than $limit_mib MiB"
mv "$work/archive" "$out"
echo "gpu_bundle.sh: $out: $(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}') MiB" \
  "($(du -sm "$bundle" | cut -f1) MiB unpacked, ${#packages[@]} Debian packages) in $(elapsed)"
