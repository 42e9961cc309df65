import rp, bisect, collections
d = rp.load('m05'); r = rp.R(d, 0); T = r.T
# rebuild segments + blocks at event 27355 with a simple address-interval model
seg0 = {s['address']: (s['total_size'], s['stream']) for s in r.segs}
for e in reversed(T):
    if e['action']=='segment_alloc': seg0.pop(e['addr'], None)
    elif e['action']=='segment_free': seg0[e['addr']] = (e['size'], e['stream'])
seg = {a:[sz,st,0] for a,(sz,st) in seg0.items()}
live = {a: rp.rnd(v[0]) for a,v in r.ghosts.items()}
blocks = {}  # seg addr -> set of (addr, size)
def find(a):
    for s,(sz,st,_) in seg.items():
        if s <= a < s+sz: return s
for a,sz in live.items():
    s=find(a); seg[s][2]+=sz; blocks.setdefault(s,{})[a]=sz
STOP=27356
for i,e in enumerate(T[:STOP]):
    act=e['action']
    if act=='alloc':
        s=find(e['addr']); sz=rp.rnd(e['size']); live[e['addr']]=sz; seg[s][2]+=sz; blocks.setdefault(s,{})[e['addr']]=sz
    elif act=='free_requested':
        sz=live.pop(e['addr'],None); s=find(e['addr'])
        if sz: seg[s][2]-=sz; blocks[s].pop(e['addr'],None)
    elif act=='segment_alloc': seg[e['addr']]=[e['size'],e['stream'],0]
    elif act=='segment_free': seg.pop(e['addr'])
reqst = T[27504]['stream']
def gaps(s):
    sz,st,_=seg[s]; bl=sorted(blocks.get(s,{}).items()); pos=s; out=[]
    for a,z in bl:
        if a>pos: out.append(a-pos)
        pos=a+z
    if s+sz>pos: out.append(s+sz-pos)
    return out
own=[s for s in seg if seg[s][1]==reqst and seg[s][0]>2*2**20]
g=[x for s in own for x in gaps(s)]
print('own stream large-pool free', rp.m(sum(g)), 'largest piece', rp.m(max(g)), 'req', rp.m(T[27504]['size']))
oth=[s for s in seg if seg[s][1]!=reqst]
print('other streams whole-free segs', sum(1 for s in oth if seg[s][2]==0), rp.g(sum(seg[s][0] for s in oth if seg[s][2]==0)))
# inference_mode evidence
c=collections.Counter()
for e in T:
    for f in e.get('frames',[]):
        if 'inference' in f['name'] or 'grad_mode' in f['filename'] or 'no_grad' in f['name']: c[(f['filename'].split('/')[-1], f['name'])]+=1
print(c.most_common(5))
# peak breakdown: blocks from before window
live = r.live_at(r.pk)
print('pre-window at peak', rp.g(sum(sz for sz,ai,fr in live if ai<0)), sum(1 for sz,ai,fr in live if ai<0))
print(collections.Counter(e['stream'] for e in T if e['action']=='alloc'))
