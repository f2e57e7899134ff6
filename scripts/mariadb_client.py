"""A minimal MariaDB client (text protocol over the Unix socket) and control of a
server of our own (scripts/server.sh), shared by scripts/random-diff.py and
scripts/stress.py. Standard library only."""
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
        self.buf = b""
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
        while len(self.buf) < n:
            try:
                d = self.s.recv(max(65536, n - len(self.buf)))
            except (OSError, socket.timeout) as e:
                raise ConnLost(str(e))
            if not d:
                raise ConnLost("connection closed")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _read_packet(self):
        data = b""
        while True:
            hdr = self._recv(4)
            ln = hdr[0] | hdr[1] << 8 | hdr[2] << 16
            self.seq = (hdr[3] + 1) & 0xFF
            data += self._recv(ln)
            if ln < 0xFFFFFF:
                return data

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

    def _read_result(self):
        r = Result()
        pkt = self._read_packet()
        if pkt[0] == 0x00:
            r.affected, p = lenenc(pkt, 1)
            r.insert_id, p = lenenc(pkt, p)
            status, r.warnings = struct.unpack_from("<HH", pkt, p)
            self._drain_more(status)
            return r
        if pkt[0] == 0xFF:
            r.err = struct.unpack_from("<H", pkt, 1)[0]
            r.errmsg = pkt[9:].decode("utf-8", "replace") if pkt[3:4] == b"#" else pkt[3:].decode("utf-8", "replace")
            return r
        ncols, _ = lenenc(pkt, 0)
        cols = []
        for _ in range(ncols):
            cd = self._read_packet()
            p = 0
            vals = []
            for _ in range(6):
                ln, p = lenenc(cd, p)
                vals.append(cd[p:p + ln])
                p += ln
            cols.append(vals[4].decode())
        pkt = self._read_packet()  # EOF
        rows = []
        while True:
            pkt = self._read_packet()
            if pkt[0] == 0xFE and len(pkt) < 9:
                r.warnings, status = struct.unpack_from("<HH", pkt, 1)
                break
            if pkt[0] == 0xFF:
                r.err = struct.unpack_from("<H", pkt, 1)[0]
                r.errmsg = pkt[9:].decode("utf-8", "replace")
                return r
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
