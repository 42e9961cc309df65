import rp, pools, statistics, collections
d = rp.load('m03'); r = rp.R(d, 0); T = r.T
o = T[-1]; print('oom', len(T)-1, o['size'], rp.g(o['size']), rp.g(o['device_free']), rp.g(r.A[-1]), rp.g(r.Rv[-1]))
sf = [i for i,e in enumerate(T) if e['action']=='segment_free']; print('segfree', sf, )
print('burst1', sf[0], sf[-2], len(sf)-1, rp.g(sum(T[i]['size'] for i in sf[:-1])), 'res', rp.g(r.Rv[sf[0]-1]), '->', rp.g(r.Rv[sf[-2]]), 'alloc', rp.g(r.A[sf[0]-1]), rp.g(r.A[sf[-2]]))
for i in range(sf[0]-3, sf[0]): print(i, T[i]['action'], T[i].get('size'))
for i in range(sf[-2]+1, len(T)): print(i, T[i]['action'], rp.g(T[i].get('size',0)), [(f['filename'].split('/')[-1], f['line'], f['name']) for f in T[i].get('frames',[])][:4])
# stretch 0..sf0
mr = max(range(sf[0]), key=lambda i:(r.Rv[i], -i)); ma = max(r.A[:sf[0]])
print('stretch1 max res', mr, rp.g(r.Rv[mr]), 'max alloc', rp.g(ma), 'diff', rp.g(r.Rv[mr]-ma), (r.Rv[mr]-ma)/r.Rv[mr])
res = pools.track(r)
st = [x for x in res if x[0] < sf[0]]; print('segallocs', len(st), 'covered', sum(1 for x in st if x[2]>=x[1]))
for x in st:
    if x[0] in (4605,4606,4607): print(x[0], rp.g(x[1]), rp.g(x[2]))
large = [e['size'] for e in T[:sf[0]] if e['action']=='alloc' and e['size']>1<<20]; print('median', rp.m(statistics.median(large)), rp.g(max(large)))
# cached free at stall start on stream, largest free piece
segs = {}
# training peak & lows
import optsteps, bisect
cl = optsteps.opt_clusters(r); print('opt clusters', len(cl), cl)
ends=[c[1] for c in cl]; b=[0]+[e+1 for e in ends]
print('lows', [rp.m(min(r.A[b[k]:b[k+1]])) for k in range(len(ends))], 'highs', [rp.g(max(r.A[b[k]:b[k+1]])) for k in range(len(ends))])
print('training peak', rp.g(max(r.A[:ends[-1]+1])))
live = r.live_at(4667); by=collections.defaultdict(lambda:[0,0])
for sz,ai,fr in live: k=rp.site(fr); by[k][0]+=sz; by[k][1]+=1
for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:6]: print(k, rp.m(v[0]), v[1])
print('4667', T[4667]['action'], [(f['filename'].split('/')[-1], f['line']) for f in T[4667]['frames']][:3])
print('params+state', rp.m(sum(sz for sz,ai,fr in live if any('optim' in f['filename'] for f in fr))))
