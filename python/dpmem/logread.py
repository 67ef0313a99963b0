"""Reads a dpmem log (docs/LOG_FORMAT.md, version 1) in Python: its META and the replay of its
allocations, to get what was live tag by tag at the moment of the peak.

    from dpmem.logread import read
    log = read("run.log")
    log.meta["run"], log.peak_bytes, log.at_peak        # {tag: bytes live when the total peaked}

A log that was cut (no CLOSE) is read up to the cut; an event that does not fit its chunk ends the
chunk. The C tools (build/dpmem-report ...) remain the reference; this is for scripts."""
import struct

EV_STRING, EV_META, EV_ALLOC, EV_FREE, EV_CLOSE = 1, 3, 6, 7, 13


class Log:
    def __init__(self):
        self.meta, self.strings, self.events = {}, {}, []   # events: (ts, +1/-1, tag id, addr, bytes)
        self.closed, self.peak_bytes, self.at_peak, self.peak_ts = False, 0, {}, 0


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 48 or data[:8] != b"DPMEMLOG":
        raise ValueError("%s: not a dpmem log" % path)
    version, header, chunk = struct.unpack_from("<III", data, 8)
    if version != 1:
        raise ValueError("%s: log version %d (this reader knows 1)" % (path, version))
    log, metas = Log(), []
    for base in range(header, len(data) - 31, chunk):
        if struct.unpack_from("<I", data, base)[0] != 0x4B435044:
            continue
        pos, end = base + 32, min(base + chunk, len(data))
        while pos + 16 <= end:
            head, ident, ts = struct.unpack_from("<IIQ", data, pos)
            if head == 0:
                break
            typ, words = head & 0xFF, head >> 16
            if words < 2 or pos + 8 * words > end:
                break
            body = data[pos + 16:pos + 8 * words]
            if typ == EV_STRING:
                log.strings[ident] = body.split(b"\0", 1)[0].decode("utf-8", "replace")
            elif typ == EV_META:
                metas.append((ident, struct.unpack_from("<I", body)[0]))
            elif typ in (EV_ALLOC, EV_FREE):
                addr, n = struct.unpack_from("<QQ", body)
                log.events.append((ts, 1 if typ == EV_ALLOC else -1, ident, addr, n))
            elif typ == EV_CLOSE:
                log.closed = True
            pos += 8 * words
    for k, v in metas:
        log.meta[log.strings.get(k, "?")] = log.strings.get(v, "")
    _replay(log)
    return log


def _replay(log):
    """ALLOC/FREE timestamps are strictly increasing across threads: sorted, they replay exactly."""
    live, total, peak = {}, 0, -1
    log.events.sort()
    for ts, sign, tag, addr, n in log.events:
        name = log.strings.get(tag, "?")
        live[name] = live.get(name, 0) + sign * n
        total += sign * n
        if total > peak:
            peak, log.peak_ts = total, ts
            log.at_peak = {k: v for k, v in live.items() if v}
    log.peak_bytes = max(peak, 0)


def category(tag):
    return tag.split("/", 1)[0]
