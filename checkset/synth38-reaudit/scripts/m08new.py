from util import *
from collections import defaultdict
d=load('m08'); r=Replay(d,0); T=r.T
pk=r.peak_index; print('peak', pk, r.peak_allocated, g(r.peak_allocated))
lb=r.live_blocks_at(pk)
def inner_user(frs):
    for f in frs:
        fn=str(f.get('filename',''))
        if '/home/seg/' in fn: return '%s (%s)'%(f['name'], fn.split('/')[-1])
    return '?'
def anycrit(frs): return any('criterion.py' in str(f.get('filename','')) for f in frs)
def innercrit(frs):
    # innermost user frame is in criterion.py
    return inner_user(frs).endswith('(criterion.py)')
for name,fn in [('any criterion frame',anycrit),('innermost user frame criterion',innercrit)]:
    s=[(sz) for sz,frs,ai in lb if fn(frs)]
    print(name, len(s), s and g(sum(s)), '%.1f%%'%(100*sum(s)/r.peak_allocated))
dd=defaultdict(lambda:[0,0])
for sz,frs,ai in lb:
    if anycrit(frs):
        k=inner_user(frs); dd[k][0]+=sz; dd[k][1]+=1
for k,v in sorted(dd.items(), key=lambda kv:-kv[1][0]): print(' ',k,g(v[0]),v[1])
# matcher blocks at peak?
mt=[sz for sz,frs,ai in lb if any('matcher' in str(f.get('filename','')) for f in frs)]
print('matcher alive', len(mt), sum(mt))
