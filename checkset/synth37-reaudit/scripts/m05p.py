import rp, collections
d = rp.load('m05'); r = rp.R(d, 0)
live = r.live_at(r.pk); by=collections.defaultdict(lambda:[0,0])
for sz,ai,fr in live:
    if ai<0: continue
    k=rp.site(fr); by[k][0]+=sz; by[k][1]+=1
for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:3]: print(k, rp.g(v[0]), v[1])
