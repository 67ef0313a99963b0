"""Reads a dpmem log (docs/LOG_FORMAT.md, version 1) in Python: its META and the replay of its
allocations, to get what was live tag by tag at the moment of the peak.

    from dpmem.logread import read
    log = read("run.log")
    log.meta["run"], log.peak_bytes, log.at_peak        # {tag: bytes live when the total peaked}

A log that was cut (no CLOSE) is read up to the cut; an event that does not fit its chunk ends the
chunk. The C tools (build/dpmem-report ...) remain the reference; this is for scripts.

Time is linear in the log and memory bounded by its strings, tags and chunks, never by its events or
its size (as the C tools): the file is read a chunk at a time (zero chunks of a sparse log skipped
with SEEK_DATA), the threads' ALLOC/FREE events are merged by time with a heap from per-thread
cursors that each hold a window of their chunk, and the breakdown at the peak is kept up to date
from the changes since the last peak instead of copied at each new one."""
import errno
import heapq
import os
import stat
import struct

EV_STRING, EV_META, EV_ALLOC, EV_FREE, EV_CLOSE = 1, 3, 6, 7, 13
CHUNK_MAGIC = 0x4B435044
WINDOWS_BYTES = 64 << 20   # what the cursors' windows may hold together


class Log:
    def __init__(self):
        self.meta, self.strings = {}, {}
        self.closed, self.peak_bytes, self.at_peak, self.peak_ts = False, 0, {}, 0


def _next_data(fd, at):
    """The first offset >= at that is not in a hole (SEEK_DATA), None when only a hole is left; at
    itself where the system cannot say."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None:
        return at
    try:
        return os.lseek(fd, at, seek_data)
    except OSError as e:
        return None if e.errno == errno.ENXIO else at


def _used_chunks(fd, size, header, chunk):
    """The offsets of the chunks with a magic, in file order; holes (a sparse log) are skipped."""
    base = header
    while base + 32 <= size:
        data_at = _next_data(fd, base)
        if data_at is None:
            return
        base += (data_at - base) // chunk * chunk   # the chunk that holds the data
        if base + 32 > size:
            return
        if struct.unpack("<I", os.pread(fd, 4, base))[0] == CHUNK_MAGIC:
            yield base
        base += chunk


def _events(buf, start, end):
    """(offset, type, id, ts) of each event of buf[start:end] that is well formed; stops at the first
    zero or malformed head, as the C reader does."""
    pos = start
    while pos + 16 <= end:
        head, ident, ts = struct.unpack_from("<IIQ", buf, pos)
        if head == 0:
            return
        words = head >> 16
        if words < 2 or pos + 8 * words > end:
            return
        yield pos, head & 0xFF, ident, ts
        pos += 8 * words


class _Cursor:
    """One thread's ALLOC/FREE events in its chunks' order, through a window of at most `window`
    bytes of the current chunk (an event longer than the window is skipped by its length)."""

    def __init__(self, fd, size, chunk, bases, window):
        self.fd, self.size, self.chunk, self.bases, self.window = fd, size, chunk, bases, window
        self.k, self.pos, self.end, self.buf, self.buf_at = -1, 0, 0, b"", 0
        self._next_chunk()

    def _next_chunk(self):
        self.k += 1
        if self.k < len(self.bases):
            base = self.bases[self.k]
            self.pos, self.end = base + 32, min(base + self.chunk, self.size)
            self.buf, self.buf_at = b"", self.pos

    def _read(self, at, n):
        """n bytes at file offset at (within the chunk), through the window."""
        if at < self.buf_at or at + n > self.buf_at + len(self.buf):
            self.buf_at = at
            self.buf = os.pread(self.fd, max(n, min(self.window, self.end - at)), at)
        return self.buf[at - self.buf_at:at - self.buf_at + n]

    def next(self):
        """(ts, +1/-1, tag id, address, bytes) of the next ALLOC/FREE, or None at the end."""
        while self.k < len(self.bases):
            if self.pos + 16 > self.end:
                self._next_chunk()
                continue
            head, ident, ts = struct.unpack("<IIQ", self._read(self.pos, 16))
            words, typ = head >> 16, head & 0xFF
            if head == 0 or words < 2 or self.pos + 8 * words > self.end:
                self._next_chunk()   # no more events, or a malformed one: the chunk ends here
                continue
            at = self.pos
            self.pos += 8 * words
            if typ in (EV_ALLOC, EV_FREE) and words >= 4:
                addr, n = struct.unpack("<QQ", self._read(at + 16, 16))
                return ts, 1 if typ == EV_ALLOC else -1, ident, addr, n
        return None


def _merged(cursors):
    """Every cursor's events, by (ts, ...): a heap holds one event per thread."""
    heap = []
    for i, c in enumerate(cursors):
        e = c.next()
        if e is not None:
            heap.append((e, i))
    heapq.heapify(heap)
    while heap:
        e, i = heap[0]
        yield e
        nxt = cursors[i].next()
        if nxt is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (nxt, i))


def read(path):
    """The log at path. A FIFO, device or directory is refused at once, as dpmem-report does (a FIFO
    would block the open, or the reads, forever)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError("%s: not a regular file (%s)" % (path, _kind(mode)))
        return _read(fd, path)
    finally:
        os.close(fd)


def _kind(mode):
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a plain file"


def _read(fd, path):
    size = os.fstat(fd).st_size
    head = os.pread(fd, 48, 0)
    if len(head) < 48 or head[:8] != b"DPMEMLOG":
        raise ValueError("%s: not a dpmem log" % path)
    version, header, chunk = struct.unpack_from("<III", head, 8)
    if version != 1:
        raise ValueError("%s: log version %d (this reader knows 1)" % (path, version))
    if chunk < 64 or header < 48:
        raise ValueError("%s: not a dpmem log (chunk size %d, header %d)" % (path, chunk, header))
    log, metas, threads = Log(), [], {}
    # First pass, a chunk at a time: the strings, META, CLOSE, and each thread's chunks.
    for base in _used_chunks(fd, size, header, chunk):
        buf = os.pread(fd, min(chunk, size - base), base)
        threads.setdefault(struct.unpack_from("<I", buf, 4)[0], []).append(base)
        for pos, typ, ident, _ in _events(buf, 32, len(buf)):
            if typ == EV_STRING:
                words = struct.unpack_from("<I", buf, pos)[0] >> 16
                body = buf[pos + 16:pos + 8 * words]
                log.strings[ident] = body.split(b"\0", 1)[0].decode("utf-8", "replace")
            elif typ == EV_META:
                metas.append((ident, struct.unpack_from("<I", buf, pos + 16)[0]))
            elif typ == EV_CLOSE:
                log.closed = True
    for k, v in metas:
        log.meta[log.strings.get(k, "?")] = log.strings.get(v, "")
    window = max(256, min(chunk, WINDOWS_BYTES // max(1, len(threads))))
    cursors = [_Cursor(fd, size, chunk, bases, window) for _, bases in sorted(threads.items())]
    _replay(log, _merged(cursors))
    return log


def _replay(log, events):
    """ALLOC/FREE timestamps are strictly increasing across threads: merged by time, they replay
    exactly. The breakdown at the peak is updated with what changed since the previous peak (each
    event enters `since` once and leaves it once: linear), not copied whole at each new peak."""
    live, since, at_peak, total, peak = {}, {}, {}, 0, -1
    for ts, sign, tag, addr, n in events:
        name = log.strings.get(tag, "?")
        live[name] = live.get(name, 0) + sign * n
        since[name] = live[name]
        total += sign * n
        if total > peak:
            peak, log.peak_ts = total, ts
            for k, v in since.items():
                if v:
                    at_peak[k] = v
                else:
                    at_peak.pop(k, None)
            since.clear()
    log.at_peak = at_peak
    log.peak_bytes = max(peak, 0)


def category(tag):
    return tag.split("/", 1)[0]
