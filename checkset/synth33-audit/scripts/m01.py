from replay import *
from live import userframe
d=load('../../synth33/m01_controlnet_canny_sd15_a10g.pickle'); t=d['device_traces'][0]
for s,e in [(2440,2478),(5745,5762),(9026,9041),(12479,12488),(15924,15931)]:
    print(s,e,t[e]['action'],(t[e]['time_us']-t[s]['time_us'])/1000,'ms', t[e+1]['action'],t[e+1]['size'])
# optimizer steps: allocations with torch/optim frames, group
steps=[];prev=-10
for i,e in enumerate(t):
    if any('optim' in f['filename'] for f in e.get('frames',[])):
        if i-prev>50: steps.append(i)
        prev=i
print('opt step starts',steps)
nost=[i for i,e in enumerate(t) if e['action']=='alloc' and not e.get('frames')]
print('nostack allocs',len(nost),nost[:1],nost[-1:])
# input allocs main:1060
inp=[(i,e['size']) for i,e in enumerate(t) if e['action']=='alloc' and userframe(e.get('frames'))=='main (train_controlnet.py:1060)']
print('inputs',len(inp),inp[:6])
# validation calls
val=[i for i,e in enumerate(t) if e['action']=='alloc' and 'log_validation' in userframe(e.get('frames'))]
print('val ranges', val[0], val[-1])
a0,r0,A,R=curve(d,0)
# low points between steps
for k in range(len(steps)-1):
    print('step',k,'min alloc between',min(A[steps[k]:steps[k+1]]))
