"""Compile a model with the aotc binary and link it into a cached shared library.

`build_library(path)` runs `aotc PATH -o NAME.o --name NAME [flags]` (docs/cli.md), links
`cc -shared NAME.o <LLVM libomp> libaotc_kernels.so <OpenBLAS> -lm -Wl,--no-undefined` into `libNAME.so`
(libomp first: it must precede libaotc_kernels' libdnnl and that one's libgomp in the library's
lookup scope, so libomp serves oneDNN's GOMP_* calls; docs/building.md "One OpenMP runtime")
and keeps the result under the cache directory, keyed by the SHA-256 of everything
that determines it: the input file's bytes, the aotc binary's bytes, the name, the
flags, the contents of every --derivatives file and the link command. A second call
with the same key loads the cached library without running aotc. Standard library
only (no torch).

Environment:
  AOTC_BIN        the aotc executable (else: <repo>/build/tools/aotc/aotc next to this
                  package, then `aotc` on PATH)
  AOTC_CACHE_DIR  the cache directory (else $XDG_CACHE_HOME/aotc or ~/.cache/aotc)
  AOTC_CC         the C compiler driver used to link (else $CC, then cc, clang-19)
  AOTC_BLAS_LIBS  link flags for the CBLAS (default -lopenblas)
  AOTC_OMP_LIB    LLVM's libomp.so (default: libomp.so.5 in the linker's and the loader's
                  paths, -l:libomp.so.5; Debian's libomp5-19 puts it there)
  AOTC_KERNELS_LIB libaotc_kernels.so (default: beside the aotc binary, see kernels_library)
  AOTC_RUNTIME_LIB libaotc_runtime.so, which the package loads to run programs (default: see
                  runtime_library)
"""
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile

from ._core import Error

#: Bumped whenever the cache layout or the build recipe changes.
CACHE_FORMAT = "aotc-python-cache-2"
_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_REPO_ROOT = os.path.dirname(os.path.dirname(_PKG_DIR))


class CompileError(Error):
    """aotc or the linker failed; the message carries the command and its stderr.
    Attributes: command (list), returncode, stderr (str)."""

    def __init__(self, what, command, returncode, stderr):
        self.command, self.returncode, self.stderr = command, returncode, stderr
        super().__init__(f"{what} failed (exit {returncode}): {shlex.join(command)}\n"
                         f"{stderr.rstrip()}")


class BuildResult:
    """Paths of one cached build: library (libNAME.so), object, header, weights
    (NAME.weights.safetensors, or None for FX-text input), name, key (hex SHA-256),
    directory, cached (True when no compilation was needed)."""

    def __init__(self, directory, name, key, cached):
        self.directory, self.name, self.key, self.cached = directory, name, key, cached
        self.library = os.path.join(directory, f"lib{name}.so")
        self.object = os.path.join(directory, f"{name}.o")
        self.header = os.path.join(directory, f"{name}.h")
        w = os.path.join(directory, f"{name}.weights.safetensors")
        self.weights = w if os.path.exists(w) else None

    def __repr__(self):
        return f"BuildResult({self.library!r}, cached={self.cached})"


def default_cache_dir():
    """$AOTC_CACHE_DIR, else $XDG_CACHE_HOME/aotc, else ~/.cache/aotc."""
    d = os.environ.get("AOTC_CACHE_DIR")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "aotc")


def find_aotc():
    """The aotc executable: $AOTC_BIN, <package>/bin/aotc, <repo>/build/tools/aotc/aotc,
    then PATH. Raises Error when none exists."""
    env = os.environ.get("AOTC_BIN")
    if env:
        if not (os.path.isfile(env) and os.access(env, os.X_OK)):
            raise Error(f"AOTC_BIN={env} is not an executable file")
        return os.path.abspath(env)
    for c in (os.path.join(_PKG_DIR, "bin", "aotc"),
              os.path.join(_REPO_ROOT, "build", "tools", "aotc", "aotc")):
        if os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    w = shutil.which("aotc")
    if w:
        return os.path.abspath(w)
    raise Error("aotc executable not found: set AOTC_BIN, or build it (scripts/build.sh "
                "puts it in build/tools/aotc/aotc)")


def c_name(path):
    """aotc's default --name: the file name up to its first '.', other characters than
    [A-Za-z0-9_] mapped to '_', a leading digit prefixed with '_' (docs/cli.md)."""
    stem = os.path.basename(os.fspath(path)).split(".", 1)[0]
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem) or "_"
    return "_" + name if name[0].isdigit() else name


_FILE_HASHES = {}


def _file_sha256(path):
    """SHA-256 of a file, memoized on (path, size, mtime_ns) (the aotc binary is large)."""
    st = os.stat(path)
    key = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
    h = _FILE_HASHES.get(key)
    if h is None:
        d = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                d.update(chunk)
        h = _FILE_HASHES[key] = d.hexdigest()
    return h


def _beside_aotc(aotc_bin, filename):
    """Where a library of the runtime lies next to an aotc binary: its build tree
    (build/tools/aotc/aotc -> build/runtime/) or its installation (P/bin/aotc -> P/lib/)."""
    bindir = os.path.dirname(os.path.realpath(aotc_bin))
    return [os.path.normpath(os.path.join(bindir, "..", "..", "runtime", filename)),
            os.path.normpath(os.path.join(bindir, "..", "lib", filename))]


def kernels_library(aotc_bin):
    """libaotc_kernels.so (the convolutions an object calls, aotc/kernels.h): $AOTC_KERNELS_LIB,
    else beside the aotc binary's build tree (build/runtime/) or install prefix (lib/)."""
    env = os.environ.get("AOTC_KERNELS_LIB")
    if env:
        return os.path.abspath(env)
    for cand in _beside_aotc(aotc_bin, "libaotc_kernels.so"):
        if os.path.isfile(cand):
            return cand
    raise Error(f"no libaotc_kernels.so next to {aotc_bin} (build/runtime/ or ../lib/); "
                f"set AOTC_KERNELS_LIB")


def runtime_library():
    """libaotc_runtime.so, the runtime whose C API (aotc/capi.h) the package calls:
    $AOTC_RUNTIME_LIB, else <package>/lib/, else <repo>/build/runtime/ of this source tree,
    else beside the aotc binary (find_aotc) as kernels_library. Raises Error naming the
    places tried."""
    env = os.environ.get("AOTC_RUNTIME_LIB")
    if env:
        if not os.path.isfile(env):
            raise Error(f"AOTC_RUNTIME_LIB={env} is not a file")
        return os.path.abspath(env)
    name = "libaotc_runtime.so"
    tried = [os.path.join(_PKG_DIR, "lib", name), os.path.join(_REPO_ROOT, "build", "runtime", name)]
    try:
        tried += _beside_aotc(find_aotc(), name)
    except Error as e:
        tried.append(f"(beside the aotc binary: {e})")
    for cand in tried:
        if os.path.isfile(cand):
            return cand
    raise Error(f"{name} not found: set AOTC_RUNTIME_LIB, or build it (scripts/build.sh puts it in "
                f"build/runtime/; `cmake --install` in P/lib/); tried " + ", ".join(tried))


def _link_command(obj, lib, kernels):
    cc = os.environ.get("AOTC_CC") or os.environ.get("CC")
    if not cc:
        cc = shutil.which("cc") or shutil.which("clang-19") or "cc"
    omp = os.environ.get("AOTC_OMP_LIB")
    omp = [omp, f"-Wl,-rpath,{os.path.dirname(omp)}"] if omp else ["-l:libomp.so.5"]
    blas = shlex.split(os.environ.get("AOTC_BLAS_LIBS", "-lopenblas"))
    # libomp before libaotc_kernels (libdnnl -> libgomp): one OpenMP runtime, libomp.
    return ([cc, "-shared", "-o", lib, obj] + omp + [kernels,
             f"-Wl,-rpath,{os.path.dirname(kernels)}"] + blas + ["-lm", "-Wl,--no-undefined"])


def _run(what, cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise CompileError(what, cmd, p.returncode, p.stderr + p.stdout)


def _host_cpu_flags():
    """The first `flags` line of /proc/cpuinfo (what --cpu=host and --cpu=native depend on), or
    "" where there is none."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    return ""


def build_library(path, name=None, flags=(), derivatives=(), cache_dir=None, aotc_bin=None,
                  force=False):
    """Compiles `path` (.pt2, ExportedProgram JSON or FX text) with aotc and links a shared
    library; returns a BuildResult. Cached by content hash (see the module docstring).

    name: the C name (default: aotc's default for `path`); flags: extra aotc flags
    (strings, e.g. ['--partitioner=default']; without a --cpu flag, --cpu=host: the library
    is for this machine); derivatives: --derivatives files (their contents enter the key);
    force: rebuild even when cached.
    Raises OSError (missing input), Error (no aotc), CompileError (aotc/linker failed;
    aotc's located error message included).
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    aotc_bin = os.path.abspath(aotc_bin) if aotc_bin else find_aotc()
    name = name or c_name(path)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"name {name!r} is not a C identifier")
    flags = [str(f) for f in flags]
    if not any(f == "--cpu" or f.startswith("--cpu=") for f in flags):
        # The library runs in this process: this machine's x86-64 level only (a third of the
        # multiversioned default's compile time); the CPU's feature flags enter the key, so a
        # cache shared with another machine never hands it code its CPU may lack.
        flags.append("--cpu=host")
    derivatives = [os.fspath(d) for d in derivatives]
    cache_dir = os.path.abspath(cache_dir or default_cache_dir())
    kernels = kernels_library(aotc_bin)

    key_parts = {
        "format": CACHE_FORMAT,
        "input": _file_sha256(path),
        "aotc": _file_sha256(aotc_bin),
        "kernels": _file_sha256(kernels),
        "name": name,
        "flags": flags,
        "derivatives": [_file_sha256(d) for d in derivatives],
        "link": _link_command("OBJ", "LIB", kernels),
    }
    if "--cpu=host" in flags or "--cpu=native" in flags:
        key_parts["host_cpu"] = _host_cpu_flags()
    key = hashlib.sha256(json.dumps(key_parts, sort_keys=True).encode()).hexdigest()
    final = os.path.join(cache_dir, key[:40])
    if not force and os.path.isfile(os.path.join(final, "build.json")):
        return BuildResult(final, name, key, cached=True)

    os.makedirs(cache_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".build-", dir=cache_dir)
    try:
        obj = os.path.join(tmp, f"{name}.o")
        cmd = [aotc_bin, os.path.abspath(path), "-o", obj, "--name", name] + flags
        for d in derivatives:
            cmd += ["--derivatives", os.path.abspath(d)]
        _run("aotc", cmd)
        link = _link_command(obj, os.path.join(tmp, f"lib{name}.so"), kernels)
        _run("linking", link)
        record = dict(key_parts, key=key, source=os.path.abspath(path), aotc_bin=aotc_bin,
                      aotc_command=cmd, link_command=link)
        with open(os.path.join(tmp, "build.json"), "w") as f:
            json.dump(record, f, indent=1, sort_keys=True)
        if force and os.path.isdir(final):
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(tmp, final)  # atomic: a complete directory or none
        except OSError:
            if not os.path.isfile(os.path.join(final, "build.json")):
                raise
            shutil.rmtree(tmp, ignore_errors=True)  # another process won the race
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BuildResult(final, name, key, cached=False)
