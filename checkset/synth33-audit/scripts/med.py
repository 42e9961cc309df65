import statistics
from replay import load
from live import live_at
for f,lim in [('m02_swinunetr_totalseg_v100.pickle',25334),('m03_openfold_monomer_cpp.pickle',None)]:
    d=load('../../synth33/'+f); t=d['device_traces'][0][:lim]
    L=[e['size'] for e in t if e['action']=='alloc' and e['size']>2**20]
    print(f, statistics.median(L)/2**20, max(L)/2**30, max(L)/statistics.median(L))
d=load('../../synth33/m01_controlnet_canny_sd15_a10g.pickle'); L=live_at(d,0,15955)
print(sum(1 for v in L.values() if v[0]==225*2**20))
