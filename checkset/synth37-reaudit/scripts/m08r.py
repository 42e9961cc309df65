import rp, collections
d = rp.load('m08'); r = rp.R(d, 0); T = r.T
live = r.live_at(r.pk)
c = collections.defaultdict(lambda:[0,0])
for sz,ai,fr in live:
    ln = [ (f['line']) for f in fr if f['name']=='multi_head_attention_forward']
    if ln:
        k = (ln[0], fr[0]['filename'].split('/')[-1], fr[0]['line'], fr[0]['name']); c[k][0]+=sz; c[k][1]+=1
tot=0
for k,v in sorted(c.items()): print(k, rp.g(v[0]), v[1]); tot+=v[0]
print('total MHA', rp.g(tot), tot/r.A[r.pk])
sel = sum(v[0] for k,v in c.items() if k[0] in (5497,5499,5501)); print('3 lines', rp.g(sel), sel/r.A[r.pk], sum(v[1] for k,v in c.items() if k[0] in (5497,5499,5501)))
# example frames
for sz,ai,fr in live:
    if sz==1131875328: print([(f['filename'].split('/')[-1], f['line'], f['name']) for f in fr][:6]); break
