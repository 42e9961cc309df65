import rp, optsteps, collections
d = rp.load('m02'); r = rp.R(d, 5); T = r.T
cl = optsteps.opt_clusters(r); print(len(cl), cl[:3], cl[-2:])
ends = [c[1] for c in cl]
import bisect
print('event 154067 in iteration', bisect.bisect_left(ends, 154067)+1, 'peak iteration', bisect.bisect_left(ends, 23761)+1)
lows = []
b = [0] + [e+1 for e in ends]
for k in range(len(ends)):
    lows.append(min(r.A[b[k]:b[k+1]]))
print([round(x/2**30,3) for x in lows])
# validation
val = [i for i,e in enumerate(T) if e['action']=='alloc' and any(f['name']=='验证' for f in e['frames'])]
print('val allocs', len(val), val[0], val[-1], 'in iteration', bisect.bisect_left(ends, val[0])+1)
base = r.A[val[0]-1]; print('val base', rp.g(base), 'max in val', rp.g(max(r.A[val[0]:val[-1]+1])-base))
# peak breakdown by site
live = r.live_at(23761)
by = collections.defaultdict(lambda:[0,0])
for sz, ai, fr in live:
    k = rp.site(fr) if fr else '<none>'; by[k][0]+=sz; by[k][1]+=1
for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:5]: print(k, rp.g(v[0]), v[1])
print(sorted(sz for sz,ai,fr in live)[-3:])
print('frames at 23761', T[23761].get('frames'))
