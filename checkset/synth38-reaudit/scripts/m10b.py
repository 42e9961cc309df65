from pool import *
d=load('m10'); pw=PoolWalk(d,0); T=pw.T; r=pw.r
for i,segs,live in pw.states([22973]):
    sf=seg_free(segs,live); big=sum(v for s,v in sf.items() if segs[s]!=2*MiB); 
    print('free large pool', g(big), 'largest seg free', m(max(sf.values())))
req=[11565,23060,34553,46042,57533,69018]
print([any('evaluate_leaves' in f for f in fr(T[i+1])) for i in req], [f for f in fr(T[23061]) if 'azgo' in f][:4])
# peaks per training phase: allocations in train
tr=[i for i,e in enumerate(T) if e['action']=='alloc' and any('train' in f['name'] for f in e['frames'] if 'azgo' in f['filename'])]
print(len(tr))
