from replay import *
from live import *
d=load('../../synth33/m06_vits16_ddp_fp16hook_rank1.pickle'); t=d['device_traces'][1]
L=live_at(d,1,18316); sites(L,4)
cs=[i for i,e in enumerate(t) if e['action']=='alloc' and 'comm_hooks.py:41' in userframe(e.get('frames'))]
print('hook41 allocs',len(cs),cs[0],cs[-1])
fin=start_live  # not used
steps=[];prev=-100
for i,e in enumerate(t):
    if e['action']=='alloc' and any('torch/optim' in f['filename'] for f in e.get('frames',[])):
        if i-prev>30: steps.append(i)
        prev=i
print('steps',steps)
a0,r0,A,R=curve(d,1)
b=[0]+steps+[len(A)]
print('lows',[ (min(A[b[k]:b[k+1]])) for k in range(len(b)-1)])
print([round(min(A[b[k]:b[k+1]])/2**20,1) for k in range(len(b)-1)])
