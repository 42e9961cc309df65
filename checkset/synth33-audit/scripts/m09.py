from replay import *
from live import *
import collections
d=load('../../synth33/m09_yolov8m_multiscale_state.pickle')
c=collections.defaultdict(lambda:[0,0,0])
for s in d['segments']:
    for b in s['blocks']:
        if b['state']=='active_allocated':
            fr=b.get('frames',[]); k=(userframe([f for f in fr if 'ultralytics' in f['filename']] or fr), fr[0]['name'] if fr else '-')
            c[k][0]+=b['size']; c[k][1]+=1; c[k][2]+=b['requested_size']
for k,v in sorted(c.items(),key=lambda x:-x[1][0]): print(k,v, round(v[0]/2**20,1))
print([ (f['name'],f['filename'][-35:],f['line']) for s in d['segments'][:1] for f in s['blocks'][0].get('frames',[])])
