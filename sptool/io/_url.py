"""Inputs and outputs named by URL (``s3://bucket/t/``, ``gs://...``, ``hdfs://...``), resolved by
pyarrow's filesystems; the rest of io asks this module, and only this one, what a name means.

A plain path is local, and so is a ``file://`` URL: ``local_path`` turns it into the path, and the
local code paths (rename, the local sweep of a dead process's temporaries) take it from there.  Any
other URL is *remote*: a pyarrow ``FileSystem`` and a path inside it, read through the filesystem's
input files and written through its output streams, moved into place by ``FileSystem.move``.

A URL stays a string all the way (a cluster hands it to its workers as one, and each worker resolves
it here); a filesystem is made once per scheme, host and query in a process, not once per part file
(making an S3 filesystem may ask the network for the bucket's region).
"""

from __future__ import annotations

import fnmatch
import glob
import io
import os
import posixpath
import re
import shutil
import threading
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from ..errors import InputError, UsageError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")

_REGISTERED: dict[str, pafs.FileSystem] = {}
_MADE: dict[tuple, tuple[pafs.FileSystem, str]] = {}
_LOCK = threading.Lock()  # decoding threads and a sink's writer thread resolve names too

# The schemes pyarrow.fs.FileSystem.from_uri resolves, by the filesystem class a pyarrow build has
# when it was built with that support (S3, GCS, HDFS and Azure are optional); for the message that
# refuses another scheme.  HDFS also needs libhdfs and a JVM at run time.
_SCHEMES_BY_CLASS = {"S3FileSystem": ("s3",), "GcsFileSystem": ("gs", "gcs"), "HadoopFileSystem": ("hdfs", "viewfs"),
                     "AzureFileSystem": ("abfs", "abfss")}


def supported_schemes() -> list[str]:
    """The URL schemes this process resolves: file, those of this pyarrow build, the registered."""
    built = [s for name, schemes in _SCHEMES_BY_CLASS.items() if hasattr(pafs, name) for s in schemes]
    return ["file", *built, *sorted(_REGISTERED)]



def scheme_of(name) -> str | None:
    """The URL scheme of ``name`` (lower case), or None for a plain path."""
    m = _SCHEME.match(name) if isinstance(name, str) else None
    return m.group(1).lower() if m else None


def register_filesystem(scheme: str, filesystem: pafs.FileSystem | None) -> None:
    """Resolve ``scheme://PATH`` as PATH inside ``filesystem`` (any pyarrow FileSystem: a
    ``PyFileSystem`` over an fsspec filesystem, a ``SubTreeFileSystem``...) in this process; None
    forgets it.  Only this process knows it: on a cluster, name storage by a scheme pyarrow
    resolves on every worker."""
    scheme = scheme.lower()
    if scheme == "file":
        raise UsageError("file:// always names the local filesystem")
    with _LOCK:
        if filesystem is None:
            _REGISTERED.pop(scheme, None)
        else:
            _REGISTERED[scheme] = filesystem


def local_path(name):
    """``name`` with a ``file://`` URL turned into its local path (``file:///abs/x`` -> ``/abs/x``);
    anything else unchanged."""
    if scheme_of(name) != "file":
        return name
    parts = urlsplit(name)
    if parts.netloc not in ("", "localhost"):
        raise UsageError("a file:// URL names the local filesystem: write file:///ABSOLUTE/PATH", path=name)
    return unquote(parts.path) or "/"


def local_only(name, what: str, why: str = "", *, directory: bool = False):
    """``name`` as a local path (a file:// URL resolved) for ``what``, which reads or writes
    through local files (``why``, said in the message); another filesystem's URL is refused,
    naming what does take one.  With ``directory``, a directory to write scratch files in
    (--tmp-dir): it must exist and be writable, checked when it is named rather than when the
    data first grows large enough to spill; a missing one is not made, since a mistyped name
    would then spill somewhere unintended."""
    if is_remote(name):
        raise UsageError(f"{what} takes local paths (or file:// URLs) only{f': {why}' if why else ''}; URLs of other "
                         "filesystems are taken where tensors (.parquet files, part directories, .arrows streams), "
                         "text formats and TFRecord files are read and written: copy it locally first", path=name)
    path = local_path(name)
    if directory and path is not None:
        if not os.path.isdir(path):
            raise UsageError(f"{what} names no directory (it must exist)", path=path)
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"{what} names a directory this process cannot write in", path=path)
    return path


def file_size(name: str) -> int:
    """Bytes of a file, local or remote."""
    return total_size(name) if is_remote(name) else os.path.getsize(local_path(name))


def is_remote(name) -> bool:
    """Whether ``name`` is a URL of a filesystem other than the local one."""
    scheme = scheme_of(name)
    return scheme is not None and scheme != "file"


def located(name: str) -> tuple[pafs.FileSystem | None, str]:
    """(filesystem, path inside it) for a remote URL; (None, the path) for a local name."""
    scheme = scheme_of(name)
    if scheme is None or scheme == "file":
        return None, local_path(name)
    parts = urlsplit(name)
    with _LOCK:
        registered = _REGISTERED.get(scheme)
    if registered is not None:
        return registered, unquote(parts.netloc + parts.path)
    key = (scheme, parts.netloc, parts.query)
    with _LOCK:
        made = _MADE.get(key)
    if made is None:
        root = f"{scheme}://{parts.netloc}/" + (f"?{parts.query}" if parts.query else "")
        try:
            made = pafs.FileSystem.from_uri(root)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
            supported = ", ".join(f"{s}://" for s in supported_schemes())
            raise UsageError(f"pyarrow's filesystems cannot open this URL ({_first_line(e)}); URLs that work "
                             f"here: {supported}, or a local path", path=name) from None
        except OSError as e:  # a known scheme that cannot be reached (an S3 bucket's region, no libhdfs)
            raise InputError(f"cannot reach the filesystem ({_first_line(e)})", path=name) from None
        with _LOCK:
            made = _MADE.setdefault(key, made)
    fs, root_path = made
    inner = unquote(parts.path).lstrip("/")
    return fs, posixpath.join(root_path, inner) if inner else root_path


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# -- what io needs of a remote name: each takes the URL ------------------------------------------


def _info(name: str) -> pafs.FileInfo:
    fs, path = located(name)
    try:
        return fs.get_file_info(path)
    except OSError as e:
        raise InputError(f"cannot reach: {_first_line(e)}", path=name) from None


def kind_of(name: str) -> str | None:
    """'dir', 'file' (or another entry that is no directory), or None when nothing is there."""
    if not is_remote(name):
        path = local_path(name)
        if not os.path.exists(path):
            return None
        return "dir" if os.path.isdir(path) else "file"
    t = _info(name).type
    return {pafs.FileType.Directory: "dir", pafs.FileType.File: "file"}.get(t)


def total_size(name: str) -> int:
    """Bytes of a remote file, or of the files of a remote directory."""
    info = _info(name)
    if info.type != pafs.FileType.Directory:
        return info.size or 0
    return sum(_info(join_path(name, entry)).size or 0 for entry, is_file in listing(name) if is_file)


def listing(name: str) -> list[tuple[str, bool]]:
    """(entry name, is a file) for each entry of the directory ``name``, local or remote."""
    fs, path = located(name)
    if fs is None:
        return [(n, os.path.isfile(os.path.join(path, n))) for n in os.listdir(path)]
    selector = pafs.FileSelector(path, allow_not_found=True, recursive=False)
    return [(posixpath.basename(i.path.rstrip("/")), i.type == pafs.FileType.File) for i in fs.get_file_info(selector)]


def open_read(name: str):
    """A file to read, with seek: a local file object, or the remote filesystem's random-access
    input file."""
    fs, path = located(name)
    if fs is None:
        return open(path, "rb")  # noqa: SIM115 (the caller closes it)
    return fs.open_input_file(path)


# A remote input read front to back is read in requests of this many bytes: a reader's small reads
# (an Arrow stream's message headers, a TFRecord's 12-byte frames) would otherwise each be a request
# to the store.
READ_AHEAD = 4 << 20


def open_sequential(name: str):
    """A file to read front to back (text, a TFRecord file, an Arrow stream): a local file object,
    or the remote filesystem's input stream behind a read-ahead buffer (``peek`` works on both)."""
    fs, path = located(name)
    if fs is None:
        return open(path, "rb")  # noqa: SIM115 (the caller closes it)
    try:
        return io.BufferedReader(fs.open_input_stream(path, compression=None), READ_AHEAD)
    except FileNotFoundError:
        raise InputError("no such file or directory", path=name) from None
    except OSError as e:
        raise InputError(f"cannot open: {_first_line(e)}", path=name) from None


def matching(pattern: str) -> list[str]:
    """The files (not directories, not hidden) a glob pattern names, in sorted order: the local
    filesystem's glob, or on another filesystem the files of the pattern's directory whose names
    match its last component (only that one may hold wildcards: an object store lists one prefix
    at a time); a URL's ``?query`` is no wildcard, and each name found keeps it."""
    if not is_remote(pattern):
        return sorted(p for p in glob.glob(local_path(pattern)) if os.path.isfile(p))
    folder, tail = split(bare(pattern))
    if glob.has_magic(folder):
        raise UsageError("on this filesystem only the last part of a pattern may hold wildcards", path=pattern)
    folder += pattern[len(bare(pattern)):]  # the query, which configures the filesystem
    if kind_of(folder) != "dir":
        return []
    return sorted(join_path(folder, n) for n, is_file in listing(folder)
                  if is_file and fnmatch.fnmatchcase(n, tail) and not n.startswith("."))


def open_output(name: str):
    """A file to write: a local file object, or the remote filesystem's output stream (on an object
    store, the object appears, whole, only when the stream is closed)."""
    fs, path = located(name)
    if fs is None:
        return open(path, "wb")  # noqa: SIM115 (the caller closes it)
    return fs.open_output_stream(path)


def make_dir(name: str, *, parents: bool = True) -> None:
    """``name`` made, and its missing parents unless ``parents`` is False (then a missing parent
    is an error: a job's task must not make again the staging directory a failed job removed);
    an existing directory is no error."""
    fs, path = located(name)
    if fs is None:
        if parents:
            os.makedirs(path, exist_ok=True)
        elif not os.path.isdir(path):
            try:
                os.mkdir(path)
            except FileExistsError:  # made meanwhile by another task
                pass
    elif parents:
        fs.create_dir(path, recursive=True)
    elif fs.get_file_info(path).type != pafs.FileType.Directory:
        parent = posixpath.dirname(path.rstrip("/"))
        if parent and fs.get_file_info(parent).type != pafs.FileType.Directory:
            raise FileNotFoundError(f"{split(name)[0]}: no such directory")
        try:
            fs.create_dir(path, recursive=False)
        except OSError:
            if fs.get_file_info(path).type != pafs.FileType.Directory:  # else made meanwhile by another task
                raise


def move(src: str, dst: str) -> None:
    """``src`` renamed to ``dst`` (a file replaces ``dst``), local or remote.  On the local
    filesystem and HDFS a rename; on object stores a copy and a delete, the destination object
    appearing whole."""
    fs, a = located(src)
    _, b = located(dst)
    if fs is None:
        os.replace(a, b)
    else:
        fs.move(a, b)


def absolute(name: str) -> str:
    """A name that means the same in another process (a cluster's worker): a local path made
    absolute, a URL as it is."""
    return name if is_remote(name) else os.path.abspath(local_path(name))


def files_in(name: str, suffix: str = "") -> list[str]:
    """The files of the directory ``name`` whose names end in ``suffix``, joined to it, in name
    order; none when there is no such directory."""
    if kind_of(name) != "dir":
        return []
    return [join_path(name, n) for n, is_file in sorted(listing(name)) if is_file and n.endswith(suffix)]


def move_dir(src: str, dst: str) -> None:
    """The directory ``src`` moved to ``dst`` (which must not exist): one rename where the
    filesystem has directories; file by file where it cannot move one (object stores)."""
    fs, a = located(src)
    _, b = located(dst)
    if fs is None:
        os.rename(a, b)
        return
    if _renames_directories(fs):
        fs.move(a, b)
        return
    fs.create_dir(b, recursive=True)
    for entry, is_file in listing(src):
        if is_file:
            fs.move(posixpath.join(a, entry), posixpath.join(b, entry))
    remove_path(src)


# pyarrow's filesystems over object stores, which have keys under a prefix and no directory to
# rename: S3's move of a "directory" copies the one key of that name (a marker, or none: an error).
_OBJECT_STORES = ("s3", "gcs")


def _renames_directories(fs: pafs.FileSystem) -> bool:
    while isinstance(fs, pafs.SubTreeFileSystem):
        fs = fs.base_fs
    return fs.type_name.removeprefix("py::") not in _OBJECT_STORES  # a PyFileSystem: its handler's name


def remove_path(name: str) -> None:
    """Delete a file or a whole directory; nothing there is no error."""
    fs, path = located(name)
    if fs is None:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.lexists(path):
            os.remove(path)
        return
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        fs.delete_dir(path)
    elif info.type != pafs.FileType.NotFound:
        fs.delete_file(path)


def remove_hidden(name: str) -> None:
    """Delete the hidden entries (names starting with '.') of the directory ``name``: what a
    staged directory holds besides its parts (its scratch, the temporaries of tasks killed while
    writing), before it is committed."""
    for entry, _ in listing(name):
        if entry.startswith("."):
            remove_path(join_path(name, entry))


def join_path(name: str, *names: str) -> str:
    """A name inside the directory ``name``: URLs join with '/' (before a ``?query``, which the
    name keeps: it configures the filesystem, as ``?endpoint_override=...`` does S3's), paths
    with the local separator."""
    if not is_remote(name):
        return os.path.join(name, *names)
    base, mark, query = name.partition("?")
    return posixpath.join(base, *names) + mark + query


def split(name: str) -> tuple[str, str]:
    """(parent, last component) of a URL, whose parent keeps its scheme, host and query (none
    for the bare root ``scheme://``); of a local path, ``os.path.split``'s."""
    if not is_remote(name):
        return os.path.split(local_path(name).rstrip(os.sep) or os.sep)
    base, mark, query = name.partition("?")
    head, _, tail = base.rstrip("/").rpartition("/")
    if head.endswith(":/"):  # the root of a bucket or host: scheme://host/NAME
        head += "/"
    return (head if head.endswith("://") else head + mark + query), tail


def is_npy(name) -> bool:
    """Whether ``name`` (a path, os.PathLike too, or a URL, its ``?query`` aside) names a .npy
    file; '-' does not."""
    if isinstance(name, os.PathLike):
        name = os.fspath(name)
    return isinstance(name, str) and name != "-" and bare(name).lower().endswith(".npy")


def bare(name: str) -> str:
    """``name`` without a URL's ``?query`` (a file:// URL as its local path): what its name says
    of the kind of output (a trailing '/', a suffix)."""
    return name.partition("?")[0] if is_remote(name) else local_path(name)
