import { extendZodWithOpenApi } from '@asteasolutions/zod-to-openapi';
import { z } from 'zod';

/**
 * zod with `.openapi()`: the schemas that check requests and describe answers also name the
 * OpenAPI document's components. Patched here once; files that call `.openapi()` while they
 * load import z from this module, so the patch is in place before they run.
 */
extendZodWithOpenApi(z);

export { z };
