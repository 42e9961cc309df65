from util import *
from collections import defaultdict
d=load('m04')
for dev in [0,1]:
    r=Replay(d,dev); T=r.T
    lb=r.live_blocks_at(r.peak_index); dd=defaultdict(lambda:[0,0])
    for sz,frs,ai in lb:
        p=['%s (%s:%s)'%(f['name'],f['filename'].split('/')[-1],f['line']) for f in frs if 'pbt-nanogpt' in f['filename'] and 'model.py' not in f['filename']]
        k=p[0] if p else 'nostack'
        dd[k][0]+=sz; dd[k][1]+=1
    for k,v in sorted(dd.items(), key=lambda kv:-kv[1][0])[:6]: print(dev,'  ',k,g(v[0]),v[1])
    # never freed at end
    ends=defaultdict(lambda:[0,0])
    for a,(sz,ai) in r.live_end.items():
        frs=T[ai]['frames'] if ai>=0 else []
        p=['%s (%s:%s)'%(f['name'],f['filename'].split('/')[-1],f['line']) for f in frs if 'pbt-nanogpt' in f['filename'] and 'model.py' not in f['filename']]
        k=p[0] if p else 'nostack'; ends[k][0]+=sz; ends[k][1]+=1
    for k,v in sorted(ends.items(), key=lambda kv:-kv[1][0])[:6]: print(dev,' end ',k,g(v[0]),v[1])
