from util import *
from collections import Counter, defaultdict
d=load('m02'); r=Replay(d,0); T=r.T; n=len(T)
print('problems', r.problems[:3])
never=[(ai,T[ai]) for ai,fi in r.alloc_index.items() if fi is None]
print('never freed', len(never), g(sum(e['size'] for a,e in never)))
# split: at load_checkpoint vs not
ck=[(a,e) for a,e in never if any('load_checkpoint' in f for f in fr(e))]
nk=[(a,e) for a,e in never if not any('load_checkpoint' in f for f in fr(e))]
print('ckpt', len(ck), m(sum(e['size'] for a,e in ck)), 'other', len(nk), g(sum(e['size'] for a,e in nk)), sum(e['size'] for a,e in nk))
# frames of other
c=Counter(tuple(fr(e)[:2]) for a,e in nk); print(c.most_common(4))
# live at end: current params sizes
ps=Counter(e['size'] for a,e in ck)
# all weights ever loaded (load_checkpoint allocs)
allck=[e['size'] for i,e in enumerate(T) if e['action']=='alloc' and any('load_checkpoint' in f for f in fr(e))]
print('ckpt allocs', len(allck), 'distinct sizes', len(set(allck)))
S=set(allck)
half=[e['size'] for a,e in nk]
print('kept blocks whose 2x is a ckpt size', sum(1 for s in half if 2*s in S), 'of', len(half))
# also check in rounded terms
cs=Counter(half); sz,cnt=max(cs.items(), key=lambda kv: kv[0]*kv[1])
print('size holding most', sz, m(sz), cnt, 'bytes', m(sz*cnt))
print('weights of twice that size alive at end', ps.get(2*sz))
# per checkpoint count
loads=[i for i,e in enumerate(T) if e['action']=='alloc' and any('load_checkpoint' in f for f in fr(e))]
# group load starts
starts=[loads[0]]+[b for a,b in zip(loads,loads[1:]) if b-a>1000]
print('loads', len(starts))
per=[]
bnd=starts+[n]
for k in range(len(starts)):
    blk=[e['size'] for a,e in nk if bnd[k]<=a<bnd[k+1]]
    per.append((len(blk), sum(blk)))
print('per ckpt', set(per))
# allocated at load starts
print('alloc at starts', [g(r.alloc_curve[s-1]) for s in starts][:3], g(r.alloc_curve[starts[-1]-1]))
# any explicit autocast frames?
print([f for f in fr(nk[0][1])][:8])
print('peak', r.peak_index, g(r.peak_allocated))
