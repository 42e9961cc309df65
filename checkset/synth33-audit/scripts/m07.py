import sys
from replay import *
from live import *
f=sys.argv[1]; dev=int(sys.argv[2]); pk=int(sys.argv[3])
d=load(f); t=d['device_traces'][dev]
L=live_at(d,dev,pk); sites(L,4)
for i in range(pk-6,pk+2): e=t[i]; print(i,e['action'],e['size'],userframe(e.get('frames')))
steps=[];prev=-100
for i,e in enumerate(t):
    if e['action']=='alloc' and any('optim' in fr['filename'] for fr in e.get('frames',[])):
        if i-prev>30: steps.append(i)
        prev=i
print('steps',steps)
a0,r0,A,R=curve(d,dev); b=[0]+steps+[len(A)]
print('highs',[max(A[b[k]:b[k+1]]) for k in range(len(b)-1)])
print('lows',[min(A[b[k]:b[k+1]]) for k in range(len(b)-1)])
sa=[i for i,e in enumerate(t) if e['action']=='segment_alloc']; print('seg allocs',len(sa),sa[-3:] if sa else None)
ns=[i for i,e in enumerate(t) if e['action']=='alloc' and not e.get('frames')]; print('nostack',ns[:1],ns[-1:])
