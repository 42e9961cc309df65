import pickle,sys,collections
GiB=2**30; MiB=2**20
def load(p): return pickle.load(open(p,'rb'))
def final(d,dev):
    segs=[s for s in d['segments'] if s['device']==dev]
    res=sum(s['total_size'] for s in segs)
    live=[b for s in segs for b in s['blocks'] if b['state']=='active_allocated']
    alloc=sum(b['requested_size'] for b in live); allocsz=sum(b['size'] for b in live)
    freeb=sum(b['size'] for s in segs for b in s['blocks'] if b['state']!='active_allocated')
    emptysegs=[s for s in segs if all(b['state']!='active_allocated' for b in s['blocks'])]
    return dict(nseg=len(segs),reserved=res,alloc_req=alloc,alloc_size=allocsz,nlive=len(live),free=freeb,
        nempty=len(emptysegs),empty_bytes=sum(s['total_size'] for s in emptysegs),
        gaps=freeb-sum(s['total_size'] for s in emptysegs), ngapsegs=sum(1 for s in segs if s not in emptysegs and any(b['state']!='active_allocated' for b in s['blocks'])))
def curve(d,dev):
    t=d['device_traces'][dev]; f=final(d,dev)
    da=sum(e['size'] for e in t if e['action']=='alloc')-sum(e['size'] for e in t if e['action']=='free_completed')
    dr=sum(e['size'] for e in t if e['action']=='segment_alloc')-sum(e['size'] for e in t if e['action']=='segment_free')
    a=f['alloc_req']-da; r=f['reserved']-dr
    A=[];R=[]
    for e in t:
        ac=e['action']
        if ac=='alloc': a+=e['size']
        elif ac=='free_completed': a-=e['size']
        elif ac=='segment_alloc': r+=e['size']
        elif ac=='segment_free': r-=e['size']
        A.append(a);R.append(r)
    return f['alloc_req']-da, f['reserved']-dr, A, R
if __name__=='__main__':
    d=load(sys.argv[1])
    for dev,t in enumerate(d['device_traces']):
        if not any(s['device']==dev for s in d['segments']) and not t: continue
        f=final(d,dev); print('dev',dev,'events',len(t),'final',f)
        if not t: continue
        a0,r0,A,R=curve(d,dev)
        pk=max(range(len(A)),key=lambda i:A[i])
        print(' start alloc',a0,'res',r0,'peak',A[pk],'at',pk,'res@peak',R[pk],'maxres',max(R),'at',R.index(max(R)),'end',A[-1],R[-1])
        acts=collections.Counter(e['action'] for e in t); print(' ',dict(acts))
        # bursts of segment_free
        i=0
        while i<len(t):
            if t[i]['action']=='segment_free':
                j=i
                while j+1<len(t) and t[j+1]['action']=='segment_free': j+=1
                n=j-i+1; tot=sum(t[k]['size'] for k in range(i,j+1))
                nxt=t[j+1] if j+1<len(t) else None
                fr=[fr['name']+':'+str(fr['line']) for fr in t[i].get('frames',[])][:4]
                print('  burst %d-%d n=%d bytes=%d next=%s %s %s res %d->%d alloc %d'%(i,j,n,tot,nxt and nxt['action'],nxt and nxt['size'],fr,R[i-1],R[j],A[j]))
                i=j+1
            else: i+=1
        for k,e in enumerate(t):
            if e['action']=='oom': print('  oom',k,{x:y for x,y in e.items() if x!='frames'})
