//! The renderer behind `memsight screenshot`: egui's wgpu renderer drawing into a texture, then
//! read back. `egui_kittest`'s own renderer gives a frame 10 s; Mesa's software rasterizer on a
//! busy 2-core machine can need longer for the frame of a 13 M-event snapshot (it timed out there
//! run after run), so this one waits up to [`FRAME_WAIT`] — bounded, so a lost device still ends
//! in an error, never a hang.

use std::iter::once;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use egui::TexturesDelta;
use egui_wgpu::{RenderState, ScreenDescriptor, wgpu};

/// What to say when no renderer can be made (no GPU driver, no Mesa, a backend that is absent).
pub const NO_ADAPTER: &str = "no graphics adapter for rendering: install Mesa (Debian / Ubuntu: apt-get install \
                              libegl-mesa0 libgl1-mesa-dri, or scripts/install-deps.sh) and try WGPU_BACKEND=gl";

/// How long a frame (or its read-back) may take on the device.
pub const FRAME_WAIT: Duration = Duration::from_mins(2);
/// One wait of [`PatientRenderer::wait`]'s loop.
const WAIT_SLICE: Duration = Duration::from_secs(5);

/// Renders frames into an image, waiting up to [`FRAME_WAIT`] for each.
pub struct PatientRenderer {
    state: RenderState,
}

impl PatientRenderer {
    /// A renderer on the adapter `egui_kittest` would pick (software rasterizers first); an
    /// error when there is none.
    pub fn new() -> Result<Self, String> {
        let setup = egui_kittest::wgpu::default_wgpu_setup();
        let instance = pollster::block_on(setup.new_instance());
        let state = pollster::block_on(RenderState::create(
            &egui_wgpu::WgpuConfiguration {
                wgpu_setup: setup,
                ..Default::default()
            },
            &instance,
            None,
            egui_wgpu::RendererOptions::PREDICTABLE,
        ))
        .map_err(|e| format!("{NO_ADAPTER}: {e}"))?;
        Ok(Self { state })
    }

    /// Waits for `submission` in slices: a backend may report a time-out well before the time it
    /// was given (seen with GL on Mesa), so each slice that times out is followed by another
    /// until [`FRAME_WAIT`] has passed.
    fn wait(&self, submission: &wgpu::SubmissionIndex) -> Result<(), String> {
        let deadline = Instant::now() + FRAME_WAIT;
        loop {
            match self.state.device.poll(wgpu::PollType::Wait {
                submission_index: Some(submission.clone()),
                timeout: Some(WAIT_SLICE),
            }) {
                Ok(_) => return Ok(()),
                Err(wgpu::PollError::Timeout) if Instant::now() < deadline => {}
                Err(e) => {
                    return Err(format!(
                        "the frame did not finish within {} s: {e}",
                        FRAME_WAIT.as_secs()
                    ));
                }
            }
        }
    }

    /// The pixels of `texture`, row by row (rows are padded on the device, not in the image).
    fn read_back(&self, texture: &wgpu::Texture) -> Result<image::RgbaImage, String> {
        let (width, height) = (texture.width(), texture.height());
        let row_bytes = width as usize * 4;
        let align = wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as usize;
        let padded_row_bytes = row_bytes.div_ceil(align) * align;
        let device = &self.state.device;
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("memsight screenshot read-back"),
            size: (padded_row_bytes * height as usize) as u64,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        encoder.copy_texture_to_buffer(
            texture.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(padded_row_bytes as u32),
                    rows_per_image: None,
                },
            },
            wgpu::Extent3d {
                width,
                height,
                depth_or_array_layers: 1,
            },
        );
        let submission = self.state.queue.submit(once(encoder.finish()));
        let (sender, receiver) = channel();
        buffer
            .slice(..)
            .map_async(wgpu::MapMode::Read, move |mapped| drop(sender.send(mapped)));
        self.wait(&submission)?;
        receiver
            .recv()
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("cannot read the frame back: {e}"))?;
        let mapped = buffer
            .slice(..)
            .get_mapped_range()
            .map_err(|e| format!("cannot read the frame back: {e}"))?;
        let pixels: Vec<u8> = mapped
            .chunks_exact(padded_row_bytes)
            .flat_map(|row| &row[..row_bytes])
            .copied()
            .collect();
        image::RgbaImage::from_raw(width, height, pixels)
            .ok_or_else(|| "the frame has the wrong size".to_string())
    }
}

impl egui_kittest::TestRenderer for PatientRenderer {
    fn handle_delta(&mut self, delta: &mut TexturesDelta) {
        let mut renderer = self.state.renderer.write();
        for (id, images) in delta.set.drain() {
            for image in images {
                renderer.update_texture(&self.state.device, &self.state.queue, id, &image);
            }
        }
        for id in delta.free.drain() {
            renderer.free_texture(&id);
        }
    }

    fn render(
        &mut self,
        ctx: &egui::Context,
        output: &egui::FullOutput,
    ) -> Result<image::RgbaImage, String> {
        let size = ctx.content_rect().size() * ctx.pixels_per_point();
        let screen = ScreenDescriptor {
            pixels_per_point: ctx.pixels_per_point(),
            size_in_pixels: [size.x.round() as u32, size.y.round() as u32],
        };
        let primitives = ctx.tessellate(output.shapes.clone(), ctx.pixels_per_point());
        let device = &self.state.device;
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let texture = device.create_texture(&wgpu::TextureDescriptor {
            label: Some("memsight screenshot"),
            size: wgpu::Extent3d {
                width: screen.size_in_pixels[0],
                height: screen.size_in_pixels[1],
                depth_or_array_layers: 1,
            },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format: self.state.target_format,
            usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
            view_formats: &[],
        });
        let view = texture.create_view(&wgpu::TextureViewDescriptor::default());
        let submission = {
            let mut renderer = self.state.renderer.write();
            let buffers = renderer.update_buffers(
                device,
                &self.state.queue,
                &mut encoder,
                &primitives,
                &screen,
            );
            {
                let mut pass = encoder
                    .begin_render_pass(&wgpu::RenderPassDescriptor {
                        label: Some("memsight screenshot"),
                        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                            view: &view,
                            resolve_target: None,
                            ops: wgpu::Operations {
                                load: wgpu::LoadOp::Clear(wgpu::Color::TRANSPARENT),
                                store: wgpu::StoreOp::Store,
                            },
                            depth_slice: None,
                        })],
                        ..Default::default()
                    })
                    .forget_lifetime();
                renderer.render(&mut pass, &primitives, &screen);
            }
            self.state
                .queue
                .submit(buffers.into_iter().chain(once(encoder.finish())))
        };
        self.wait(&submission)?;
        self.read_back(&texture)
    }
}
