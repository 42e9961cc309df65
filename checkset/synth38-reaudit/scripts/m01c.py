from util import *
from collections import Counter
d=load('m01'); T=d['device_traces'][0]
c=Counter(); cb=Counter()
for i,e in enumerate(T):
    if e['action']=='segment_alloc':
        n=T[i+1]; p=[f for f in fr(n) if '.py' in f and 'torch/' not in f]
        k=p[0] if p else 'none/autograd'
        c[k]+=1; cb[k]+=e['size']
for k,v in cb.most_common(6): print(c[k], g(v), k)
