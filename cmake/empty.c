/* SPDX-License-Identifier: Apache-2.0 */
/* Stands in for a folder whose sources are not written yet, so the tree configures. */
typedef int ing_empty_translation_unit;
