"""A minimal MariaDB client (text protocol, and the binary protocol of prepared
statements, over the Unix socket) and control of a server of our own
(scripts/server.sh), shared by scripts/random-diff.py, scripts/stress.py and
scripts/bench.py. Standard library only."""
import hashlib
import os
import signal
import socket
import struct
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --------------------------------------------------------------------------
# Minimal MySQL/MariaDB text-protocol client
# --------------------------------------------------------------------------
CLIENT_LONG_PASSWORD = 1
CLIENT_LONG_FLAG = 4
CLIENT_PROTOCOL_41 = 512
CLIENT_TRANSACTIONS = 8192
CLIENT_SECURE_CONNECTION = 32768
CLIENT_MULTI_RESULTS = 1 << 17
CLIENT_PLUGIN_AUTH = 1 << 19


class ConnLost(Exception):
    pass


class Result:
    __slots__ = ("err", "errmsg", "affected", "insert_id", "warnings", "rows", "cols")

    def __init__(self):
        self.err = None
        self.errmsg = ""
        self.affected = None
        self.insert_id = None
        self.warnings = 0
        self.rows = None
        self.cols = None

    def key(self):
        return (self.err, self.affected, self.insert_id, self.warnings, self.rows)

    def show(self, maxlen=300):
        if self.err is not None:
            return "ERROR %d: %s (warnings %d)" % (self.err, self.errmsg[:200], self.warnings)
        if self.rows is None:
            return "OK affected=%s insert_id=%s warnings=%d" % (self.affected, self.insert_id, self.warnings)
        out = ["%d rows (warnings %d)" % (len(self.rows), self.warnings)]
        for r in self.rows[:40]:
            out.append("  " + fmt_row(r, maxlen))
        if len(self.rows) > 40:
            out.append("  ...")
        return "\n".join(out)


def fmt_val(v, maxlen=60):
    if v is None:
        return "NULL"
    if len(v) > maxlen:
        return "<%d bytes md5 %s starts %r>" % (len(v), hashlib.md5(v).hexdigest()[:8], v[:20])
    return repr(v)[1:]


def fmt_row(r, maxlen=60):
    return "(" + ", ".join(fmt_val(v, maxlen) for v in r) + ")"


def lenenc_int(n):
    """The length-encoded integer of n (protocol "int<lenenc>")."""
    if n < 0xFB:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + struct.pack("<Q", n)


# Column/parameter types of the binary protocol (include/mysql_com.h enum_field_types)
T_DECIMAL, T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE, T_NULL, T_TIMESTAMP = 0, 1, 2, 3, 4, 5, 6, 7
T_LONGLONG, T_INT24, T_DATE, T_TIME, T_DATETIME, T_YEAR = 8, 9, 10, 11, 12, 13
T_BLOB, T_VAR_STRING = 252, 253
UNSIGNED_FLAG = 32


def bin_param(v):
    """(type, unsigned, value bytes) of a Python value bound to a `?`:
    None -> NULL, int -> LONGLONG, float -> DOUBLE, str -> VAR_STRING (utf-8),
    bytes -> BLOB; the bytes go to the server as they are (no escaping, no hex)."""
    if v is None:
        return T_NULL, 0, b""
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, int):
        if v >= 1 << 63:
            return T_LONGLONG, 0x80, struct.pack("<Q", v)
        return T_LONGLONG, 0, struct.pack("<q", v)
    if isinstance(v, float):
        return T_DOUBLE, 0, struct.pack("<d", v)
    if isinstance(v, str):
        v = v.encode("utf-8", "surrogateescape")
        return T_VAR_STRING, 0, lenenc_int(len(v)) + v
    if isinstance(v, (bytes, bytearray, memoryview)):
        v = bytes(v)
        return T_BLOB, 0, lenenc_int(len(v)) + v
    raise TypeError("cannot bind a %s" % type(v).__name__)


def bin_value(buf, p, ctype, flags):
    """One non-NULL value of a binary-protocol row at p: (text bytes as the text
    protocol would send them, next position)."""
    uns = flags & UNSIGNED_FLAG
    if ctype == T_TINY:
        return str(buf[p] if uns else struct.unpack_from("<b", buf, p)[0]).encode(), p + 1
    if ctype in (T_SHORT, T_YEAR):
        return str(struct.unpack_from("<H" if uns else "<h", buf, p)[0]).encode(), p + 2
    if ctype in (T_LONG, T_INT24):
        return str(struct.unpack_from("<I" if uns else "<i", buf, p)[0]).encode(), p + 4
    if ctype == T_LONGLONG:
        return str(struct.unpack_from("<Q" if uns else "<q", buf, p)[0]).encode(), p + 8
    if ctype in (T_FLOAT, T_DOUBLE):
        v = struct.unpack_from("<f" if ctype == T_FLOAT else "<d", buf, p)[0]
        t = repr(v)
        return (t[:-2] if t.endswith(".0") else t).encode(), p + (4 if ctype == T_FLOAT else 8)
    if ctype in (T_DATE, T_DATETIME, T_TIMESTAMP):
        n = buf[p]
        f = buf[p + 1:p + 1 + n] + b"\0" * (11 - n)
        y, mo, d, h, mi, s, us = struct.unpack("<HBBBBBI", f)
        out = "%04d-%02d-%02d" % (y, mo, d)
        if ctype != T_DATE:
            out += " %02d:%02d:%02d" % (h, mi, s) + (".%06d" % us if us else "")
        return out.encode(), p + 1 + n
    if ctype == T_TIME:
        n = buf[p]
        f = buf[p + 1:p + 1 + n] + b"\0" * (12 - n)
        neg, days, h, mi, s, us = struct.unpack("<BIBBBI", f)
        out = "%s%02d:%02d:%02d" % ("-" if neg else "", days * 24 + h, mi, s) + (".%06d" % us if us else "")
        return out.encode(), p + 1 + n
    ln, p = lenenc(buf, p)                    # strings, BLOBs, DECIMAL, BIT, ENUM, SET, GEOMETRY
    return bytes(buf[p:p + ln]), p + ln


def lenenc(buf, pos):
    b = buf[pos]
    if b < 0xFB:
        return b, pos + 1
    if b == 0xFB:
        return None, pos + 1
    if b == 0xFC:
        return struct.unpack_from("<H", buf, pos + 1)[0], pos + 3
    if b == 0xFD:
        return int.from_bytes(buf[pos + 1:pos + 4], "little"), pos + 4
    return struct.unpack_from("<Q", buf, pos + 1)[0], pos + 9


class Conn:
    def __init__(self, sock_path, db=None, timeout=600):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(sock_path)
        self.buf, self.pos = b"", 0
        self.seq = 0
        pkt = self._read_packet()
        if pkt[0] == 0xFF:
            raise ConnLost("handshake error: %r" % pkt)
        # protocol 10 handshake
        pos = pkt.index(b"\0", 1) + 1
        pos += 4
        salt1 = pkt[pos:pos + 8]
        pos += 8 + 1
        pos += 2 + 1 + 2 + 2
        salt_len = pkt[pos]
        pos += 1 + 10
        salt2 = pkt[pos:pos + max(13, salt_len - 8)].rstrip(b"\0")
        flags = (CLIENT_LONG_PASSWORD | CLIENT_LONG_FLAG | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS
                 | CLIENT_SECURE_CONNECTION | CLIENT_MULTI_RESULTS | CLIENT_PLUGIN_AUTH)
        resp = struct.pack("<IIB", flags, 1 << 30, 45) + b"\0" * 23
        resp += b"root\0" + b"\0" + b"mysql_native_password\0"
        self.seq = 1
        self._write_packet(resp)
        while True:
            pkt = self._read_packet()
            if pkt[0] == 0x00:
                break
            if pkt[0] == 0xFF:
                raise ConnLost("auth error: %r" % pkt)
            if pkt[0] == 0xFE:  # auth switch: empty password for any plugin
                self._write_packet(b"")
                continue
            raise ConnLost("unexpected auth packet %r" % pkt[:20])
        if db:
            r = self.query("USE `%s`" % db)
            if r.err:
                raise ConnLost("USE %s: %s" % (db, r.errmsg))

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass

    def _recv(self, n):
        """The next n bytes of the stream. `buf[pos:]` is what was read ahead.
        A large read (a 1 MiB row) goes straight into one buffer with recv_into:
        appending 64 KiB chunks to a bytes object copied the whole packet again
        per chunk, ~1 ms per 1 MiB row on this machine, more than the server's
        own work for the query."""
        b, p = self.buf, self.pos
        if len(b) - p >= n:
            self.pos = p + n
            return b[p:p + n]
        rest = b[p:]
        try:
            if n - len(rest) >= 65536:
                out = bytearray(n)
                out[:len(rest)] = rest
                view, got = memoryview(out), len(rest)
                while got < n:
                    k = self.s.recv_into(view[got:], n - got)
                    if not k:
                        raise ConnLost("connection closed")
                    got += k
                self.buf, self.pos = b"", 0
                return bytes(out)
            chunks, have = [rest], len(rest)
            while have < n:
                d = self.s.recv(65536)
                if not d:
                    raise ConnLost("connection closed")
                chunks.append(d)
                have += len(d)
        except (OSError, socket.timeout) as e:
            raise ConnLost(str(e))
        self.buf, self.pos = b"".join(chunks), n
        return self.buf[:n]

    def _read_packet(self):
        parts = []
        while True:
            hdr = self._recv(4)
            ln = hdr[0] | hdr[1] << 8 | hdr[2] << 16
            self.seq = (hdr[3] + 1) & 0xFF
            parts.append(self._recv(ln))
            if ln < 0xFFFFFF:
                return parts[0] if len(parts) == 1 else b"".join(parts)

    def _write_packet(self, payload):
        out = []
        pos = 0
        while True:
            chunk = payload[pos:pos + 0xFFFFFF]
            out.append(struct.pack("<I", len(chunk))[:3] + bytes([self.seq]) + chunk)
            self.seq = (self.seq + 1) & 0xFF
            pos += len(chunk)
            if len(chunk) < 0xFFFFFF:
                break
        try:
            self.s.sendall(b"".join(out))
        except OSError as e:
            raise ConnLost(str(e))

    def query(self, sql):
        if isinstance(sql, str):
            sql = sql.encode("utf-8", "surrogateescape")
        self.seq = 0
        self._write_packet(b"\x03" + sql)
        return self._read_result()

    # ---- prepared statements (binary protocol) ----
    def prepare(self, sql):
        """COM_STMT_PREPARE: a Stmt, or raises RuntimeError with the server's error."""
        if isinstance(sql, str):
            sql = sql.encode("utf-8", "surrogateescape")
        self.seq = 0
        self._write_packet(b"\x16" + sql)
        pkt = self._read_packet()
        if pkt[0] == 0xFF:
            raise RuntimeError("prepare: ERROR %d %s" % self._err(pkt))
        if pkt[0] != 0x00 or len(pkt) < 12:
            raise ConnLost("unexpected COM_STMT_PREPARE answer %r" % pkt[:20])
        stmt_id, ncols, nparams = struct.unpack_from("<IHH", pkt, 1)
        if nparams:                     # parameter definitions + EOF (no CLIENT_DEPRECATE_EOF)
            for _ in range(nparams):
                self._read_packet()
            self._read_packet()
        if ncols:
            for _ in range(ncols):
                self._read_packet()
            self._read_packet()
        return Stmt(self, stmt_id, nparams, ncols)

    def _ok_or_err(self, pkt, r):
        """Fills r from an OK or ERR packet; False if pkt starts a result set."""
        if pkt[0] == 0x00:
            r.affected, p = lenenc(pkt, 1)
            r.insert_id, p = lenenc(pkt, p)
            status, r.warnings = struct.unpack_from("<HH", pkt, p)
            self._drain_more(status)
            return True
        if pkt[0] == 0xFF:
            r.err, r.errmsg = self._err(pkt)
            return True
        return False

    def _row_packets(self, r):
        """The row packets of a result set up to its EOF: (packets, server
        status), r.warnings set; on an ERR packet r.err is set instead."""
        pkts = []
        while True:
            pkt = self._read_packet()
            if pkt[0] == 0xFE and len(pkt) < 9:
                r.warnings, status = struct.unpack_from("<HH", pkt, 1)
                return pkts, status
            if pkt[0] == 0xFF:
                r.err, r.errmsg = self._err(pkt)
                return pkts, 0
            pkts.append(pkt)

    def _err(self, pkt):
        code = struct.unpack_from("<H", pkt, 1)[0]
        msg = pkt[9:] if pkt[3:4] == b"#" else pkt[3:]
        return code, msg.decode("utf-8", "replace")

    def _coldefs(self, ncols):
        """Column definitions (protocol 41) + EOF: [(name, type, flags)]."""
        cols = []
        for _ in range(ncols):
            cd = self._read_packet()
            p = 0
            vals = []
            for _ in range(6):
                ln, p = lenenc(cd, p)
                vals.append(cd[p:p + ln])
                p += ln
            _, p = lenenc(cd, p)          # length of the fixed fields (0x0c)
            ctype = cd[p + 6]
            flags = struct.unpack_from("<H", cd, p + 7)[0]
            cols.append((vals[4].decode(), ctype, flags))
        self._read_packet()  # EOF
        return cols

    def _read_bin_result(self):
        """The answer to COM_STMT_EXECUTE: OK, ERR or a binary result set."""
        r = Result()
        pkt = self._read_packet()
        if self._ok_or_err(pkt, r):
            return r
        ncols, _ = lenenc(pkt, 0)
        cols = self._coldefs(ncols)
        nb = (ncols + 7 + 2) // 8          # NULL bitmap, offset 2
        rows = []
        pkts, status = self._row_packets(r)
        if r.err is not None:
            return r
        for pkt in pkts:
            nulls = pkt[1:1 + nb]
            p = 1 + nb
            row = []
            for i, (_, ctype, flags) in enumerate(cols):
                bit = i + 2
                if nulls[bit >> 3] & (1 << (bit & 7)):
                    row.append(None)
                    continue
                v, p = bin_value(pkt, p, ctype, flags)
                row.append(v)
            rows.append(tuple(row))
        r.rows = rows
        r.cols = [c[0] for c in cols]
        self._drain_more(status)
        return r

    def _read_result(self):
        r = Result()
        pkt = self._read_packet()
        if self._ok_or_err(pkt, r):
            return r
        ncols, _ = lenenc(pkt, 0)
        cols = [c[0] for c in self._coldefs(ncols)]
        rows = []
        pkts, status = self._row_packets(r)
        if r.err is not None:
            return r
        for pkt in pkts:
            p = 0
            row = []
            for _ in range(ncols):
                ln, p = lenenc(pkt, p)
                if ln is None:
                    row.append(None)
                else:
                    row.append(bytes(pkt[p:p + ln]))
                    p += ln
            rows.append(tuple(row))
        r.rows = rows
        r.cols = cols
        self._drain_more(status)
        return r

    def _drain_more(self, status):
        while status & 8:  # SERVER_MORE_RESULTS_EXISTS
            r = self._read_result()
            status = 0
            return r


class Stmt:
    """A server-side prepared statement (COM_STMT_PREPARE). execute(*params)
    sends the values in the binary protocol (COM_STMT_EXECUTE; each value typed,
    a bytes value as raw bytes, never escaped or hex-encoded) and returns a
    Result, binary result-set rows decoded to the text protocol's bytes.
    send_long_data streams a parameter in pieces before execute."""

    def __init__(self, conn, stmt_id, nparams, ncols):
        self.conn, self.id, self.nparams, self.ncols = conn, stmt_id, nparams, ncols
        self.long_data = set()

    def send_long_data(self, param, data, chunk=1 << 20):
        """COM_STMT_SEND_LONG_DATA (no answer); execute() then binds `param` as the
        data sent, whatever value it is given there. Pass bytes or str."""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        for pos in range(0, max(1, len(data)), chunk):
            self.conn.seq = 0
            self.conn._write_packet(b"\x18" + struct.pack("<IH", self.id, param) + data[pos:pos + chunk])
        self.long_data.add(param)

    def execute(self, *params):
        if len(params) != self.nparams:
            raise ValueError("statement takes %d parameters, %d given" % (self.nparams, len(params)))
        out = [b"\x17", struct.pack("<IBI", self.id, 0, 1)]    # no cursor, iteration count 1
        if self.nparams:
            nulls = bytearray((self.nparams + 7) // 8)
            types, values = [], []
            for i, v in enumerate(params):
                if i in self.long_data:
                    # its value came in COM_STMT_SEND_LONG_DATA: a type, no value
                    types.append(struct.pack("<BB", T_BLOB, 0))
                    continue
                t, uns, b = bin_param(v)
                if t == T_NULL:
                    nulls[i >> 3] |= 1 << (i & 7)
                types.append(struct.pack("<BB", t, uns))
                values.append(b)
            out += [bytes(nulls), b"\x01"] + types + values   # new-params-bound: types follow
        self.conn.seq = 0
        self.conn._write_packet(b"".join(out))
        self.long_data.clear()
        return self.conn._read_bin_result()

    def close(self):
        """COM_STMT_CLOSE (no answer)."""
        self.conn.seq = 0
        self.conn._write_packet(b"\x19" + struct.pack("<I", self.id))


# --------------------------------------------------------------------------
# Server control
# --------------------------------------------------------------------------
class Server:
    def __init__(self, var, port):
        self.var = var
        self.port = port
        self.sock = os.path.join(var, "run", "mysqld.sock")
        self.env = dict(os.environ, TIDESDB_VAR=var, TIDESDB_PORT=str(port))

    def _sh(self, what):
        p = subprocess.run(["bash", os.path.join(ROOT, "scripts", "server.sh"), what], env=self.env,
                           capture_output=True, text=True)
        if p.returncode != 0 and what == "start":
            raise RuntimeError("server start failed:\n" + p.stdout + p.stderr)
        return p

    def start(self):
        self._sh("start")

    def stop(self):
        self._sh("stop")

    def pid(self):
        try:
            with open(os.path.join(self.var, "run", "mysqld.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def kill9(self):
        pid = self.pid()
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for _ in range(200):
                try:
                    os.kill(pid, 0)
                    with open("/proc/%d/stat" % pid) as f:
                        if ") Z" in f.read():
                            break
                except (ProcessLookupError, FileNotFoundError):
                    break
                time.sleep(0.05)
            try:
                os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                pass

    def alive(self):
        return self._sh("status").returncode == 0

    def error_log_tail(self, n=30):
        try:
            with open(os.path.join(self.var, "log", "error.log"), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""
