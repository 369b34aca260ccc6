import sys, json
lines = open(sys.argv[1]).read().splitlines()
for a, b in zip(lines[::2], lines[1::2]):
    r = json.loads(b); c, k = r['card'], r['keyword']
    print(f"{a:46s} card cold {c['cold_s']*1e3:5.1f} warm {c['warm_s']*1e3:4.1f} first {c['first_s']*1e3:5.1f} c/w {c['cold_over_warm']:5.1f} c/f {c['cold_over_first']:4.2f} | kw cold {k['cold_s']*1e3:5.1f} warm {k['warm_s']*1e3:4.1f} c/w {k['cold_over_warm']:5.2f} | open {c['open_s']*1e3:4.0f}")
