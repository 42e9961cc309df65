# at each segment_alloc: free cached bytes (reserved - live rounded sizes) vs the request that follows
import sys
from replay import *
def rnd(n): return max(512,(n+511)//512*512)
d=load(sys.argv[1]); dev=int(sys.argv[2]); t=d['device_traces'][dev]
a0,r0,A,R=curve(d,dev)
# live rounded size: approximate with requested rounded to 512
f=final(d,dev)
live_sz=f['alloc_size']-sum(rnd(e['size']) for e in t if e['action']=='alloc')+sum(rnd(e['size']) for e in t if e['action']=='free_completed')
n=0
for i,e in enumerate(t):
    if e['action']=='alloc': live_sz+=rnd(e['size'])
    elif e['action']=='free_completed': live_sz-=rnd(e['size'])
    elif e['action']=='segment_alloc':
        n+=1
        nxt=next((x for x in t[i+1:] if x['action'] in('alloc','oom')),None)
        cached_free=R[i-1]-live_sz if i>0 else None
        print(i,'seg',e['size'],'next req',nxt['size'],'cached free before',cached_free, 'covered' if cached_free and cached_free>=nxt['size'] else '')
print('n seg_alloc',n)
