# min and median over runs of each row's per-run min (columns: n=1M, n=16K)
import sys, statistics, re
rows = {}
order = []
for fn in sys.argv[1:]:
    for line in open(fn):
        if '|' not in line or line.startswith('func'): continue
        head, a, b = line.split('|')
        key = head.rstrip()
        if key not in rows: rows[key] = ([], []); order.append(key)
        rows[key][0].append(float(a.split('/')[0])); rows[key][1].append(float(b.split('/')[0]))
print('%-52s | %-17s | %-17s' % ('func impl input', 'n=1M min / med', 'n=16K min / med'))
for k in order:
    a, b = rows[k]
    print('%-52s | %6.3f / %6.3f | %6.3f / %6.3f' % (k, min(a), statistics.median(a), min(b), statistics.median(b)))
