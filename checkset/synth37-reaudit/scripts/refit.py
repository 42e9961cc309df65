import rp
def refit(stem, dev):
    d=rp.load(stem); r=rp.R(d,dev); T=r.T
    sf=[i for i,e in enumerate(T) if e['action']=='segment_free']
    rel=[[T[i]['size'], T[i].get('stream'), T[i]['size']==2**21] for i in sf]
    new=sorted([(e['size'], e.get('stream'), e['size']==2**21) for i,e in enumerate(T) if e['action']=='segment_alloc' and i>sf[-1]], reverse=True)
    room=[[x[0], x[1], x[2]] for x in rel]
    held=0
    for sz,st,sm in new:
        cand=[b for b in room if b[1]==st and b[2]==sm and b[0]>=sz]
        if cand:
            b=min(cand, key=lambda b:b[0]); b[0]-=sz; held+=sz
    print(stem, rp.g(held), 'of', rp.g(sum(x[0] for x in new)))
refit('m02',5); refit('m10',0)
d=rp.load('m09'); r=rp.R(d,0); live=r.live_at(r.pk)
bl=[(sz,fr) for sz,ai,fr in live if sz==221184000 or abs(sz-210.9*2**20)<2**20]
print(len(bl), [(f['filename'].split('/')[-1], f['line']) for f in bl[0][1]][:5])
