from replay import *
from live import *
import collections
d=load('../../synth33/m03_openfold_monomer_cpp.pickle'); t=d['device_traces'][0]
L=live_at(d,0,144); sites(L,8)
# C++ stacks: userframe picks first .py not in site-packages
c=collections.Counter(round(v[0]/2**20) for v in L.values()); print(sorted(c.items(),key=lambda x:-x[0])[:6])
print([ (f['name'],f['filename'][-40:]) for f in t[144]['frames'][:12]])
