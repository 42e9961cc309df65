import sys; sys.path.insert(0,'../../synth33-audit/scripts')
from replay import *
d=load('../../synth33/m01_controlnet_canny_sd15_a10g.pickle'); t=d['device_traces'][0]
opt=[i for i,e in enumerate(t) if any('optim' in f['filename'] for f in e.get('frames',[]))]
print('last optim event',opt[-1], t[opt[-1]]['action'])
# step groups
grp=[];s=opt[0];p=opt[0]
for i in opt[1:]:
    if i-p>50: grp.append((s,p)); s=i
    p=i
grp.append((s,p)); print(grp)
a0,r0,A,R=curve(d,0)
bounds=[0]+[g[1]+1 for g in grp]
for k in range(len(bounds)-1):
    print('iter',k+1,bounds[k],bounds[k+1]-1,'min',min(A[bounds[k]:bounds[k+1]]),'end',A[bounds[k+1]-1])
print('after last step min',min(A[bounds[-1]:]),'max',max(A[bounds[-1]:]))
print('segalloc after 15918',[ (i,e['size']) for i,e in enumerate(t) if i>15900 and e['action']=='segment_alloc'])
