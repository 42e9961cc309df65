from util import *
from collections import defaultdict, Counter
d=load('m03'); r=Replay(d,7); T=r.T
pk=59808
print('peak frames', fr(T[pk])[:8])
# optimizer steps: allocs with adam frames or step
opt=[i for i,e in enumerate(T) if e['action']=='alloc' and any('optim' in f for f in fr(e))]
zg=[i for i,e in enumerate(T) if e['action']=='free_requested' and any('zero_grad' in f for f in fr(e))]
print('zero_grad frees', len(zg), zg[:3])
# step starts: first alloc with 训练一轮 frame after each zero_grad group
zs=[zg[0]]+[b for a,b in zip(zg,zg[1:]) if b-a>50]
print('zero_grad groups', len(zs))
val=[i for i,e in enumerate(T) if e['action']=='alloc' and any('验证' in f for f in fr(e))]
print('validation allocs', val[0], val[-1], len(val))
# training step peaks
bounds=zs+[len(T)]
pks=[(max(range(a,b), key=lambda i:r.alloc_curve[i])) for a,b in zip(bounds,bounds[1:])]
print('step peaks', [(p, round(r.alloc_curve[p]/GiB,4)) for p in pks][:3], '...', min(r.alloc_curve[p] for p in pks)/GiB, max(r.alloc_curve[p] for p in pks)/GiB)
vp=max(range(val[0],val[-1]+1), key=lambda i:r.alloc_curve[i]); print('val peak', vp, r.alloc_curve[vp]/GiB, r.alloc_curve[vp])
# training peak excluding val
tp=max([p for p in pks if not (val[0]<=p<=val[-1])], key=lambda p:r.alloc_curve[p]); print('train max peak', tp, r.alloc_curve[tp], g(r.alloc_curve[tp]), 'diff', m(r.alloc_curve[vp]-r.alloc_curve[tp]))
print('gap at peak', m(r.res_curve[pk]-r.alloc_curve[pk]), (r.res_curve[pk]-r.alloc_curve[pk])/r.res_curve[pk])
sf=[i for i,e in enumerate(T) if e['action']=='segment_free']; print('segfree', sf[0], sf[-1], len(sf), m(sum(T[i]['size'] for i in sf)), fr(T[sf[0]])[:3])
after=[T[i]['size'] for i in range(sf[-1], len(T)) if T[i]['action']=='segment_alloc']; print('segalloc after', len(after), m(sum(after)))
print('res before/after', g(r.res_curve[sf[0]-1]), g(r.res_curve[sf[-1]]), 'alloc', g(r.alloc_curve[sf[-1]]))
# which zero_grad group does 66778 fall in
print('iter of 66778', sum(1 for z in zs if z<=66778), 'iter of 59808', sum(1 for z in zs if z<=59808))
# grads alive at val peak: blocks with no frames allocated in trace
lb=r.live_blocks_at(vp)
nost=[sz for sz,frs,ai in lb if not frs]; print('no-stack at val peak', len(nost), m(sum(nost)))
gr=[sz for sz,frs,ai in lb if not frs and ai>=0]; print(' of which in trace (grads)', len(gr), m(sum(gr)))
lbt=r.live_blocks_at(tp); gr=[sz for sz,frs,ai in lbt if not frs and ai>=0]; print('grads at train peak', len(gr), m(sum(gr)))
