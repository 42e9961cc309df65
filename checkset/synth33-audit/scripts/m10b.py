from replay import *
d=load('../../synth33/m10_timesformer_k400_lion.pickle'); t=d['device_traces'][0]
rel=sorted([t[i]['size'] for i in range(15622,15769)],reverse=True)
new=sorted([e['size'] for i,e in enumerate(t) if e['action']=='segment_alloc' and i>15768],reverse=True)
used=[False]*len(rel); got=0
for n in new:
    best=None
    for j,r in enumerate(rel):
        if not used[j] and r>=n and (best is None or r<rel[best]): best=j
    if best is not None: used[best]=True; got+=n
print(got, got/2**30)
# pools: small (2MiB) vs large
