from pool import *
import statistics
d=load('m01'); pw=PoolWalk(d,0); T=pw.T; r=pw.r
sa=[i for i,e in enumerate(T) if e['action']=='segment_alloc']
print('first/last segalloc', sa[0], sa[-1], len(sa))
cov=0; ex=None
for i,segs,live in pw.states(sa):
    e=T[i]; small = e['size']==2*MiB
    sf=seg_free(segs,live)
    freepool=sum(v for s,v in sf.items() if is_small(segs[s])==small)
    nxt=T[i+1]
    if freepool>=nxt['size']: cov+=1
    if i==9961: ex=(nxt['size'], freepool, fr(nxt)[:6])
print('covered', cov, 'of', len(sa)); print('ev9961', ex[0], g(ex[0]), g(ex[1]), ex[2])
large=[e['size'] for e in T if e['action']=='alloc' and e['size']>1*MiB]
print('median large', m(statistics.median(large)), 'max', g(max(large)), max(large)/statistics.median(large))
pk=56990; e=T[pk]; print('peak ev', e['action'], e['size'], e.get('time_us'), fr(e)[:12])
print('res at peak', g(r.res_curve[pk]))
# step lows: allocations in _prepare_sample
starts=[i for i,e in enumerate(T) if e['action']=='alloc' and any('_prepare_sample' in f for f in fr(e))]
# first alloc of each update (group)
st=[starts[0]]+[s for a,s in zip(starts,starts[1:]) if s-a>100]
print('updates', len(st), [r.alloc_curve[s-1] for s in st])
# blocks live at peak grouped by top frame
lb=r.live_blocks_at(pk)
from collections import defaultdict
dd=defaultdict(lambda:[0,0])
for sz,frs,ai in lb:
    k=[f['name'] for f in frs][:1]
    k=str(k); dd[k][0]+=sz; dd[k][1]+=1
for k,v in sorted(dd.items(), key=lambda kv:-kv[1][0])[:8]: print(' ', k, g(v[0]), v[1])
big=sorted(lb, key=lambda x:-x[0])[:4]
for sz,frs,ai in big: print(' big', m(sz), ai, [f['name'] for f in frs][:5])
# low points per iteration (between updates)
lows=[min(r.alloc_curve[a:b]) for a,b in zip(st, st[1:]+[len(T)])]
print('lows', [m(x) for x in lows])
