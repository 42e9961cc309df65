import sys, collections; sys.path.insert(0,'../../synth33-audit/scripts')
from replay import *; from live import *
d=load('../../synth33/m08_xlstm_mlstm24_pile_ring.pickle')
L=start_live(d,0)
g=[v[0] for a,v in L.items() if v[2]=='final' and not v[1]]
w=[b['requested_size'] for s in d['segments'] for b in s['blocks'] if b['state']=='active_allocated' and any(f['name']=='convert' for f in b.get('frames',[]))]
print('weights (convert)',len(w),sum(w),'no-stack ghosts kept to end',len(g),sum(g),'same sizes',collections.Counter(w)==collections.Counter(g))
