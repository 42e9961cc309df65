from util import *
from pool import *
from collections import defaultdict
# m05
d=load('m05'); T=d['device_traces'][0]; print('m05 peak frames', [f for f in fr(T[6112]) if 'transformers' in f or 'run_rvl' in f][:6])
# m07
d=load('m07'); r=Replay(d,0); lb=r.live_blocks_at(1579)
print('m07 largest', [m(x[0]) for x in sorted(lb,key=lambda x:-x[0])[:5]])
c=defaultdict(int)
for sz,frs,ai in lb: c[sz]+=1
print('m07 703MiB blocks', c.get(737280000), 'sizes>600MiB', sorted([(m(k),v) for k,v in c.items() if k>600*MiB]))
print('m07 peak frames', fr(r.T[1579])[:2], 'res gap', m(r.reserved_at_peak-r.peak_allocated))
# m08
d=load('m08'); r=Replay(d,0); lb=r.live_blocks_at(2964)
crit=sum(sz for sz,frs,ai in lb if any('criterion.py' in f['filename'] for f in frs)); ncrit=sum(1 for sz,frs,ai in lb if any('criterion.py' in f['filename'] for f in frs))
print('m08 criterion', g(crit), ncrit, crit/r.peak_allocated)
dd=defaultdict(lambda:[0,0])
for sz,frs,ai in lb:
    p=['%s (%s:%s)'%(f['name'],f['filename'].split('/')[-1],f['line']) for f in frs if 'm2f-coco' in f['filename']]
    k=p[0] if p else 'nostack'; dd[k][0]+=sz; dd[k][1]+=1
for k,v in sorted(dd.items(), key=lambda kv:-kv[1][0])[:12]: print('  ',k,g(v[0]),v[1])
print('m08 largest', [m(x[0]) for x in sorted(lb,key=lambda x:-x[0])[:3]])
# m09
d=load('m09')
dd=defaultdict(lambda:[0,0])
for s in d['segments']:
    for b in s['blocks']:
        if b['state']=='active_allocated':
            fs=b.get('frames') or []
            names=[f['name'] for f in fs if '/srv/diarize' in f['filename']]
            k='load_models' if 'load_models' in names else (names[0] if names else 'none'); dd[k][0]+=b['size']; dd[k][1]+=1
print('m09', {k:(m(v[0]),v[1]) for k,v in dd.items()})
