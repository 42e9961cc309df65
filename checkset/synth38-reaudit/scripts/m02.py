from util import *
from collections import defaultdict
import statistics
d=load('m02'); r=Replay(d,0); T=r.T; n=len(T)
parts=[(k*n//8,(k+1)*n//8) for k in range(8)]
lows=[min(r.alloc_curve[a:b]) for a,b in parts]; highs=[max(r.alloc_curve[a:b]) for a,b in parts]
print('lows', [m(x) for x in lows]); print('spans median', m(statistics.median([h-l for h,l in zip(highs,lows)])))
never=[(ai,T[ai]) for ai,fi in r.alloc_index.items() if fi is None]
print('never freed', len(never), g(sum(e['size'] for a,e in never)))
dd=defaultdict(lambda:[0,0])
for a,e in never:
    p=[f for f in fr(e) if 'soup_sweep' in f]; k=p[0] if p else '?'
    dd[k][0]+=e['size']; dd[k][1]+=1
for k,v in dd.items(): print(' ',k,m(v[0]),v[1])
pk=114055; lb=r.live_blocks_at(pk)
dd=defaultdict(lambda:[0,0])
for sz,frs,ai in lb:
    p=[ '%s (%s:%s)'%(f['name'],f['filename'],f['line']) for f in frs if 'soup_sweep' in f['filename']]; k=p[0] if p else '?'
    dd[k][0]+=sz; dd[k][1]+=1
for k,v in sorted(dd.items(), key=lambda kv:-kv[1][0]): print(' peak',k,m(v[0]),v[1])
print('res-alloc at peak', m(r.res_curve[pk]-r.alloc_curve[pk]), (r.res_curve[pk]-r.alloc_curve[pk])/r.res_curve[pk])
# never-freed made before the peak alive at peak
kept=[sz for sz,frs,ai in lb if ai>=0 and r.alloc_index[ai] is None]
print('kept-to-end alive at peak', len(kept), m(sum(kept)))
# transient at peak
tmp=[sz for sz,frs,ai in lb if ai>=0 and r.alloc_index[ai] is not None]
print('freed later alive at peak', len(tmp), m(sum(tmp)), sorted(tmp)[-3:])
print(fr(T[pk])[:4])
