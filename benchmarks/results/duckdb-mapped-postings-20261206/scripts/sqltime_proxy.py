import time
class Proxy:
    def __init__(self, con, log):
        self._c, self._log = con, log
    def __getattr__(self, name):
        attr = getattr(self._c, name)
        if name.startswith("fetch") or name in ("arrow", "df", "pl", "fetchnumpy"):
            def timed(*a, **k):
                t = time.perf_counter(); r = attr(*a, **k); self._log.append(("  " + name, time.perf_counter() - t)); return r
            return timed
        return attr
    def execute(self, sql, *a, **k):
        t = time.perf_counter(); self._c.execute(sql, *a, **k); self._log.append((" ".join(str(sql).split())[:400], time.perf_counter() - t)); return self
    def cursor(self):
        return Proxy(self._c.cursor(), self._log)

