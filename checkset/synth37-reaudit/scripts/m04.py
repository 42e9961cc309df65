import rp, collections
d = rp.load('m04'); print(d.keys(), [len(t) for t in d['device_traces']])
by = collections.defaultdict(lambda:[0,0,0])
for s in d['segments']:
    for b in s['blocks']:
        if b['state']=='active_allocated':
            k = rp.site(b.get('frames',[]), skip=('site-packages','/torch/','lib/python','/nn/modules')); by[k][0]+=b['size']; by[k][1]+=1; by[k][2]+=b['requested_size']
for k,v in sorted(by.items(), key=lambda x:-x[1][0])[:6]: print(k, rp.m(v[0]), v[1], rp.m(v[2]))
nst = sum(1 for s in d['segments'] for b in s['blocks'] if b['state']=='active_allocated' and b.get('frames'))
print('with stacks', nst)
