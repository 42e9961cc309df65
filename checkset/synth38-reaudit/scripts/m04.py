from util import *
from collections import defaultdict
d=load('m04')
for dev in [0,1]:
    r=Replay(d,dev); T=r.T
    print('dev',dev,'peak',r.peak_index,g(r.peak_allocated),'res',g(r.reserved_at_peak), 'gap', m(r.reserved_at_peak-r.peak_allocated))
    lb=r.live_blocks_at(r.peak_index); dd=defaultdict(lambda:[0,0])
    for sz,frs,ai in lb:
        p=['%s (%s:%s)'%(f['name'],f['filename'].split('/')[-1],f['line']) for f in frs if 'pbt-nanogpt' in f['filename']]
        k=p[-1] if p else 'nostack'
        dd[k][0]+=sz; dd[k][1]+=1
    for k,v in sorted(dd.items(), key=lambda kv:-kv[1][0])[:6]: print('  ',k,g(v[0]),v[1])
    opt=[i for i,e in enumerate(T) if e['action']=='alloc' and any('optim' in f for f in fr(e))]
r=Replay(d,1); T=r.T
for i in range(62088,62095):
    e=T[i]; print(i, e['action'], e.get('size'), e.get('device_free'), e.get('time_us'), m(r.res_curve[i]), g(r.alloc_curve[i]))
print('dt ms', (T[62094]['time_us']-T[62090]['time_us'])/1000)
print('oom frames', len(T[62094].get('frames',[])))
