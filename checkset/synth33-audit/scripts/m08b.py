from replay import *
from live import *
import collections
d=load('../../synth33/m08_xlstm_mlstm24_pile_ring.pickle')
c=collections.defaultdict(lambda:[0,0])
for s in d['segments']:
    for b in s['blocks']:
        if b['state']=='active_allocated':
            fr=b.get('frames',[]); k=(userframe(fr), fr[0]['name'] if fr else '-')
            c[k][0]+=b['requested_size']; c[k][1]+=1
for k,v in sorted(c.items(),key=lambda x:-x[1][0]): print(k,v, round(v[0]/2**20,1))
